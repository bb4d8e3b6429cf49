"""The pages' objects as JSON: the same reads the pages render, so numbers agree by construction."""

from __future__ import annotations

from datetime import datetime

from budgets.delivery import Delivery
from portal.dashboards import HomeBoard
from portal.metrics import PyramidNow, PyramidSeries, WaitReport
from scheduling.models import Workload
from scheduling.reports import FairTreeComparison, StartOption, WorkloadDetail


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def pyramid_now_json(p: PyramidNow) -> dict:
    return {
        "availability": p.availability,
        "occupancy": p.occupancy,
        "occupancy_allocated": p.occupancy_allocated,
        "occupancy_unallocated": p.occupancy_unallocated,
        "impact": p.impact,
        "utilization": p.utilization,
        "installed_gpus": p.installed_gpus,
        "healthy_gpus": p.healthy_gpus,
        "funded_gpus": p.funded_gpus,
        "unfunded_gpus": p.unfunded_gpus,
        "delivered_gpu_hours": p.delivered_gpu_h,
        "owed_gpu_hours": p.owed_gpu_h,
        "allocations_at_95pct": p.allocations_meeting,
        "allocations_owed": p.allocations_owed,
    }


def pyramid_period_json(s: PyramidSeries) -> dict:
    """Occupancy over the page's period, as the occupancy chart defines it (the card shows this)."""
    return {
        "occupancy": s.period_occupancy,
        "occupancy_allocated": s.period_occupancy_allocated,
        "occupancy_unallocated": s.period_occupancy_unallocated,
    }


def pyramid_series_json(s: PyramidSeries) -> dict:
    return {
        "time": [iso(x) for x in s.x],
        "availability": s.availability,
        "occupancy_allocated": s.occupancy_allocated,
        "occupancy_unallocated": s.occupancy_unallocated,
        "impact": s.impact,
        "utilization": s.utilization,
        "pass_mean_ms": s.pass_mean_ms,
        "pass_max_ms": s.pass_max_ms,
    }


def waits_json(r: WaitReport) -> dict:
    return {
        "classes": [
            {"workload_class": c.workload_class, "starts": c.starts, "p50_s": c.p50_s, "p90_s": c.p90_s}
            for c in r.classes
        ],
        "time": [iso(x) for x in r.x],
        "p50_s_by_class": r.p50_by_class,
        "p90_s_by_class": r.p90_by_class,
        "preemptions": r.preemptions,
        "requeues": r.requeues,
        "gpu_hours_lost": r.lost_gpu_h,
        "preemptions_series": r.preemptions_series,
        "gpu_hours_lost_series": r.lost_gpu_h_series,
    }


def delivery_json(r: Delivery) -> dict:
    return {
        "node": {"id": r.node.pk, "path": r.node.path, "name": r.node.name},
        "cluster": r.cluster.slug,
        "days": r.days,
        "allocation_gpus": r.gpus,
        "entitlement_gpus": r.entitlement_gpus,
        "fair_share_ratio": r.fair_share_ratio,
        "delivered_gpu_hours": r.delivered_gpu_h,
        "owed_gpu_hours": r.owed_gpu_h,
        "delivered_owed_ratio": r.ratio,
        "undelivered_gpu_hours": r.undelivered_gpu_h,
        "series": {
            "time": [iso(x) for x in r.x],
            "delivered_gpus": r.delivered_gpus,
            "owed_gpus": r.owed_gpus,
            "entitlement_gpus": r.entitlement_series,
        },
        "children": [
            {
                "id": c.node.pk,
                "path": c.node.path,
                "allocation_gpus": c.gpus,
                "delivered_gpu_hours": c.delivered_gpu_h,
                "owed_gpu_hours": c.owed_gpu_h,
                "delivered_owed_ratio": c.ratio,
                "under_95pct": c.below_target,
            }
            for c in r.children
        ],  # fmt: skip
        "undelivered_by_cause": [
            {"cause": cause, "label": label, "gpu_hours": v} for cause, label, v in r.causes
        ],
    }


def queue_row_json(w: Workload, *, now: datetime) -> dict:
    reason = getattr(w, "pending_reason", None)
    return {
        "id": w.pk,
        "name": w.name,
        "position": reason.position if reason else None,
        "allocation": w.allocation.path if w.allocation is not None else None,
        "user": w.user_name,
        "gpus": w.gpus,
        "workload_class": w.workload_class,
        "wait_s": max((now - w.queued_at).total_seconds(), 0.0),
        "reason_code": reason.code if reason else None,
        "reason": reason.message if reason else None,
        "estimated_start": iso(reason.estimated_start) if reason else None,
    }


def comparison_json(c: FairTreeComparison | None) -> dict | None:
    if c is None:
        return None
    return {
        "ahead": c.ahead_total,
        "same_allocation_ahead": c.same_allocation_ahead,
        "first_shared_ancestors": [
            {"ancestor": ancestor, "branches": [
                {"path": b.path, "fair_share_ratio": b.fair_share_ratio, "ahead": b.ahead, "yours": b.mine} for b in rows
            ]}
            for ancestor, rows in c.ancestor_rows.items()
        ],
    }  # fmt: skip


def why_pending_json(d: WorkloadDetail, *, now: datetime) -> dict:
    w = d.workload
    return {
        **queue_row_json(w, now=now),
        "state": w.state,
        "reason_params": w.pending_reason.params if hasattr(w, "pending_reason") else {},
        "contract": {
            "minimum_runtime_s": w.min_runtime_s,
            "resumable": w.resumable,
            "protected_until": iso(d.open_run.protected_until) if d.open_run else None,
        },
        "fair_tree": comparison_json(d.comparison),
        "runs": [
            {
                "attempt": r.attempt,
                "started_at": iso(r.started_at),
                "ended_at": iso(r.ended_at),
                "gpus": r.gpus,
                "wait_s": r.wait_s,
                "end_reason": r.end_reason or None,
            }
            for r in d.runs
        ],  # fmt: skip
        "decisions": [{"at": iso(x.created_at), "kind": x.kind, "reason": x.reason} for x in d.decisions],
        "reason_history": [{"at": iso(c.at), "code": c.code, "reason": c.message} for c in d.reason_changes],
    }


def options_json(options: list[StartOption]) -> list[dict]:
    return [
        {
            "option": o.label,
            "starts_now": o.starts_now,
            "estimated_start": iso(o.estimated_start),
            "detail": o.detail,
            "code": o.code,
            "changes": dict(o.changes or {}),
        }
        for o in options
    ]


def home_json(board: HomeBoard, *, now: datetime) -> dict:
    return {
        "workloads": [
            {
                "id": w.pk,
                "name": w.name,
                "cluster": w.cluster.slug,
                "state": w.state,
                "gpus": w.gpus,
                "allocation": w.allocation.path if w.allocation is not None else None,
            }
            for w in board.workloads
        ],  # fmt: skip
        "state_counts": board.state_counts,
        "days": board.days,
        "allocations": [
            {
                "path": a.node.path,
                "cluster": a.cluster.slug,
                "role": a.role,
                "delivered_gpu_hours": a.delivered_gpu_h,
                "owed_gpu_hours": a.owed_gpu_h,
                "delivered_owed_ratio": a.ratio,
                "under_95pct": a.below_target,
            }
            for a in board.allocations
        ],  # fmt: skip
        "pyramids": {cluster.slug: pyramid_now_json(p) for cluster, p in board.pyramids},
    }
