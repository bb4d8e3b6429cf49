"""Phase 4 of the pass: write the plan before anything reaches the backend.

Set-based: decisions in one bulk insert; pending reasons compared with what is stored and written
only where the code, message or position changed (or the estimated start moved by more than
ESTIMATE_SLACK), so a quiet queue of 50,000 costs one read and almost no writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from scheduling.accounting import accounting_charge_owed
from scheduling.models import (
    Cluster,
    Decision,
    DecisionKind,
    PendingReason,
    Run,
    SchedulingPass,
    Workload,
    WorkloadState,
)
from scheduling.policy import Plan, ReasonCode
from scheduling.snapshot import PassInputs

ESTIMATE_SLACK = timedelta(seconds=60)
REASON_FIELDS = ["code", "params", "message", "position", "estimated_start", "updated_at"]


def _at(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds is not None else None


def persist_plan(
    *, record: SchedulingPass, cluster: Cluster, inputs: PassInputs, plan: Plan, now: datetime
) -> None:
    decisions = _decisions(record=record, cluster=cluster, plan=plan, now=now)
    Decision.objects.bulk_create(decisions, batch_size=1000)
    rows = [
        PendingReason(
            workload_id=r.workload_id,
            code=str(r.code),
            params=dict(r.params),
            message=r.message,
            position=r.position,
            estimated_start=_at(r.estimated_start),
            updated_at=now,
        )
        for r in plan.reasons
    ]
    record.reasons_written = pending_reasons_write(cluster=cluster, rows=rows)
    accounting_charge_owed(cluster_id=cluster.pk, now=now, owed_gpus=inputs.owed_gpus)
    record.pending_count = len(inputs.snapshot.pending)
    record.running_count = len(inputs.snapshot.running)
    record.started_count, record.preempted_count = len(plan.starts), len(plan.preemptions)
    record.reserved_count = len(plan.reservations)
    record.fair_share = {path: _finite(ratio) for path, ratio in plan.fair_share.items()}
    record.plan_timings_ms = {name: round(ms, 3) for name, ms in plan.timings_ms.items()}
    record.save()


def _finite(value: object) -> object:
    """JSON has no infinity or NaN: store None (e.g. a fair-share ratio with no budget share)."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


def _json_safe(params: Mapping, cleaned: dict[int, dict]) -> dict:
    key = id(params)
    if key not in cleaned:
        cleaned[key] = {name: _finite(value) for name, value in params.items()}
    return cleaned[key]


def _decisions(*, record: SchedulingPass, cluster: Cluster, plan: Plan, now: datetime) -> list[Decision]:
    attempts = dict(
        Workload.objects.filter(pk__in=[s.workload_id for s in plan.starts]).values_list("id", "attempt")
    )
    running_attempts = dict(
        Run.objects.filter(
            cluster=cluster, ended_at__isnull=True, workload_id__in=[p.workload_id for p in plan.preemptions]
        ).values_list("workload_id", "attempt")
    )
    common = {"scheduling_pass": record, "cluster": cluster, "created_at": now}
    return [
        *(
            Decision(
                workload_id=p.workload_id,
                kind=DecisionKind.PREEMPT,
                attempt=running_attempts.get(p.workload_id, 0),
                requeue=p.requeue,
                preemptor_id=p.preemptor_id,
                reason=p.reason,
                **common,
            )
            for p in plan.preemptions
        ),
        *(
            Decision(
                workload_id=s.workload_id,
                kind=DecisionKind.START,
                attempt=attempts.get(s.workload_id, 0) + 1,
                placement=[list(piece) for piece in s.placement],
                protected_until=_at(s.protected_until),
                funded=s.funded,
                **common,
            )
            for s in plan.starts
        ),
        *(
            Decision(
                workload_id=r.workload_id,
                kind=DecisionKind.RESERVE,
                placement=[[n, 0] for n in r.nodes],
                start_at=_at(r.start_at),
                **common,
            )
            for r in plan.reservations
        ),
    ]


def _differs(old: tuple, new: PendingReason) -> bool:
    code, message, position, estimated_start = old
    if (code, message, position) != (new.code, new.message, new.position):
        return True
    if (estimated_start is None) != (new.estimated_start is None):
        return True
    return estimated_start is not None and abs(estimated_start - new.estimated_start) > ESTIMATE_SLACK


def pending_reasons_write(*, cluster: Cluster, rows: list[PendingReason]) -> int:
    """Make the stored reasons equal ``rows`` (one per pending workload); returns rows written."""
    stored = {
        wid: (code, message, position, estimated)
        for wid, code, message, position, estimated in PendingReason.objects.filter(
            workload__cluster=cluster
        ).values_list("workload_id", "code", "message", "position", "estimated_start")
    }
    fresh = [row for row in rows if row.workload_id not in stored]
    changed = [row for row in rows if row.workload_id in stored and _differs(stored[row.workload_id], row)]
    gone = stored.keys() - {row.workload_id for row in rows}
    PendingReason.objects.bulk_create(fresh, batch_size=2000)
    _bulk_update_reasons(changed)
    gone_ids = list(gone)
    for start in range(0, len(gone_ids), 5000):
        PendingReason.objects.filter(workload_id__in=gone_ids[start : start + 5000]).delete()
    return len(fresh) + len(changed) + len(gone)


def _bulk_update_reasons(rows: list[PendingReason]) -> None:
    """One UPDATE ... FROM unnest(arrays) on PostgreSQL; Django's bulk_update elsewhere."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        PendingReason.objects.bulk_update(rows, REASON_FIELDS, batch_size=500)
        return
    table = PendingReason._meta.db_table
    field = PendingReason._meta.get_field("params")
    columns = (
        [r.workload_id for r in rows],
        [r.code for r in rows],
        [field.get_db_prep_value(r.params, connection) for r in rows],
        [r.message for r in rows],
        [r.position for r in rows],
        [r.estimated_start for r in rows],
        [r.updated_at for r in rows],
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS p SET code = v.code, params = v.params::jsonb, message = v.message, "
            "position = v.position, estimated_start = v.estimated_start, updated_at = v.updated_at "
            "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::int[], %s::timestamptz[], "
            "%s::timestamptz[]) AS v(workload_id, code, params, message, position, estimated_start, updated_at) "
            "WHERE p.workload_id = v.workload_id",
            columns,
        )


def persist_backend_unavailable(
    *, record: SchedulingPass, cluster: Cluster, error: str, now: datetime
) -> None:
    """Every pending workload's reason becomes BACKEND_UNAVAILABLE (kept as is when it already is)."""
    name = cluster.get_backend_kind_display()
    local = timezone.localtime(now).strftime("%H:%M")
    message = f"the {name} backend did not answer at {local}; retrying"
    pending = Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING)
    stored = dict(PendingReason.objects.filter(workload__cluster=cluster).values_list("workload_id", "code"))
    rows = [
        PendingReason(
            workload_id=wid,
            code=ReasonCode.BACKEND_UNAVAILABLE,
            params={"backend": name, "error": error},
            message=message,
            position=None,
            estimated_start=None,
            updated_at=now,
        )
        for wid in pending.values_list("id", flat=True)
        if stored.get(wid) != ReasonCode.BACKEND_UNAVAILABLE
    ]
    PendingReason.objects.bulk_create([r for r in rows if r.workload_id not in stored], batch_size=2000)
    _bulk_update_reasons([r for r in rows if r.workload_id in stored])
    record.reasons_written = len(rows)
    record.pending_count = len(stored) if not rows else pending.count()
