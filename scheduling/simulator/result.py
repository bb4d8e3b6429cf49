"""Turn a finished engine into a :class:`SimulationResult`: the JSON summary and the report series.

Waits are submit -> first start. Jobs that never started count with the time they waited until
the end of the period (or until they were cancelled): a lower bound, so a policy that starves work
cannot look better by leaving it out. Requeue waits (requeue -> restart) are reported apart.
Only jobs submitted inside the measured period count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from scheduling.simulator.engine import Engine, JobState
from scheduling.simulator.metrics import jain_index, percentile
from scheduling.simulator.model import SimJob

AT_95PCT = 0.95


@dataclass
class SimulationResult:
    summary: dict[str, object]
    per_team: list[dict[str, object]] = field(default_factory=list)
    hourly: list[dict[str, float]] = field(default_factory=list)  # hour -> mean GPUs funded/unfunded/healthy
    waits_by_class: dict[str, list[float]] = field(default_factory=dict)

    def to_json(self, *, wall_clock: bool = True) -> str:
        """Deterministic JSON: sorted keys; ``sim_wall_s`` (the only non-reproducible value) optional."""
        summary = dict(self.summary)
        if not wall_clock:
            summary.pop("sim_wall_s", None)
            summary.pop("plan_ms_p50", None)
            summary.pop("plan_ms_p95", None)
            summary.pop("plan_s_total", None)
        return json.dumps(summary, sort_keys=True, indent=2)


def summarize(engine: Engine, policy: str, wall_s: float) -> SimulationResult:
    measured = _measured_jobs(engine)
    waits = {state.spec.id: _first_wait(state, engine.horizon) for state in measured}
    per_team = _per_team(engine)
    summary: dict[str, object] = {
        "policy": policy,
        "source": engine.inputs.name,
        "days": engine.inputs.days,
        "jobs": len(measured),
        "gpus": engine.inputs.gpus,
        "nodes": len(engine.inputs.cluster_nodes),
        **_impact(engine),
        **_pyramid(engine),
        **_queue(engine, measured, waits),
        **_plan_times(engine, wall_s),
        "parameters": engine.inputs.parameters,
        "per_team": per_team,
    }
    if engine.inputs.trace_adjustments is not None:  # read from a trace: what reading it changed
        summary["trace_adjustments"] = dict(engine.inputs.trace_adjustments)
    return SimulationResult(
        summary=summary,
        per_team=per_team,
        hourly=_hourly(engine),
        waits_by_class=_group_waits(measured, waits, lambda spec: spec.workload_class),
    )


def _measured_jobs(engine: Engine) -> list[JobState]:
    start, end = engine.inputs.warmup_s, engine.horizon
    return [state for state in engine.jobs.values() if start <= state.spec.submit_s < end]


def _first_wait(state: JobState, horizon: float) -> float:
    if state.first_start is not None:
        return state.first_start - state.spec.submit_s
    end = state.ended_at if state.ended_at is not None else horizon
    return end - state.spec.submit_s


def _per_team(engine: Engine) -> list[dict[str, object]]:
    rows = []
    for path in sorted(engine.ledger.allocations):
        ledger = engine.ledger.allocations[path]
        if ledger.owed_s <= 0:
            continue
        rows.append(
            {
                "allocation": path,
                "budget_gpus": engine.budgets.get(path, 0.0),
                "entitlement_fraction": round(ledger.fraction, 6),
                "owed_gpu_hours": round(ledger.owed_s / 3600, 3),
                "delivered_gpu_hours": round(ledger.delivered_s / 3600, 3),
                "delivered_owed_ratio": round(ledger.delivered_s / ledger.owed_s, 4),
            }
        )
    return rows


def _impact(engine: Engine) -> dict[str, object]:
    """Computed from the unrounded ledger, so the overall ratio is exact."""
    ledgers = [ledger for ledger in engine.ledger.allocations.values() if ledger.owed_s > 0]
    owed = sum(ledger.owed_s for ledger in ledgers)
    met = sum(min(ledger.delivered_s, ledger.owed_s) for ledger in ledgers)
    capped = [min(ledger.delivered_s / ledger.owed_s, 1.0) for ledger in ledgers]
    jain = jain_index(capped)
    return {
        "delivered_owed_ratio": round(met / owed, 4) if owed else None,
        "owed_gpu_hours": round(owed / 3600, 1),
        "delivered_gpu_hours": round(sum(ledger.delivered_s for ledger in ledgers) / 3600, 1),
        "teams": len(ledgers),
        "teams_at_95pct": sum(ratio >= AT_95PCT for ratio in capped),
        "jain_index": None if jain is None else round(jain, 4),
    }


def _pyramid(engine: Engine) -> dict[str, object]:
    totals = engine.ledger.totals
    installed, healthy = totals.get("installed", 0.0), totals.get("healthy", 0.0)
    assigned = totals.get("funded", 0.0) + totals.get("unfunded", 0.0)
    return {
        "availability": _ratio(healthy, installed),
        "occupancy": _ratio(assigned, healthy),
        "unallocated_share": _ratio(totals.get("unfunded", 0.0), assigned),
        "utilization": _ratio(totals.get("busy", 0.0), assigned),
        "demand_over_capacity": _ratio(totals.get("requested", 0.0), healthy),
    }


def _queue(engine: Engine, measured: list[JobState], waits: dict[int, float]) -> dict[str, object]:
    counters = engine.counters
    requeue_waits = [wait for state in measured for wait in state.requeue_waits]
    statuses = [state.status for state in measured]
    return {
        **_wait_stats(list(waits.values())),
        **{f"funded_{key}": value for key, value in _wait_stats(_funded_waits(measured, waits)).items()},
        "requeue_wait_p50_s": _seconds(percentile(requeue_waits, 0.5)),
        "requeue_wait_p90_s": _seconds(percentile(requeue_waits, 0.9)),
        "by_class": _wait_table(_group_waits(measured, waits, lambda spec: spec.workload_class)),
        "by_kind": _kind_table(measured, waits),
        "never_started": sum(state.first_start is None for state in measured),
        "completed": statuses.count("completed"),
        "cancelled": statuses.count("cancelled"),
        "preemptions": counters["preemptions"],
        "requeues": counters["requeues"],
        "lost_gpu_hours": round(counters["lost_gpu_s"] / 3600, 2),
        "node_failures": counters["node_failures"],
        "node_failure_ends": counters["node_failure_ends"],
        "node_failure_lost_gpu_hours": round(counters["node_failure_lost_gpu_s"] / 3600, 2),
    }


def _funded_waits(measured: list[JobState], waits: dict[int, float]) -> list[float]:
    return [waits[state.spec.id] for state in measured if state.funded]


def _plan_times(engine: Engine, wall_s: float) -> dict[str, object]:
    milliseconds = [seconds * 1000 for seconds in engine.plan_seconds]
    return {
        "passes": engine.counters["passes"],
        "plan_ms_p50": _rounded(percentile(milliseconds, 0.5), 3),
        "plan_ms_p95": _rounded(percentile(milliseconds, 0.95), 3),
        "plan_s_total": round(sum(engine.plan_seconds), 3),
        "sim_wall_s": round(wall_s, 3),
    }


def _group_waits(measured: list[JobState], waits: dict[int, float], label) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for state in measured:
        groups.setdefault(label(state.spec), []).append(waits[state.spec.id])
    return dict(sorted(groups.items()))


def _wait_table(groups: dict[str, list[float]]) -> dict[str, dict[str, object]]:
    return {name: {"jobs": len(values), **_wait_stats(values)} for name, values in groups.items()}


def _kind_table(measured: list[JobState], waits: dict[int, float]) -> dict[str, dict[str, object]]:
    """Per scenario kind (debug, batch, sweep, ...): waits, how often it was preempted, what that lost.

    (Preemptions of jobs submitted before the measured period count in the totals, not here.)"""
    table = _wait_table(_group_waits(measured, waits, _kind))
    preempted: dict[str, int] = {}
    lost_gpu_hours: dict[str, float] = {}
    for state in measured:
        kind = _kind(state.spec)
        preempted[kind] = preempted.get(kind, 0) + state.preempted
        lost_gpu_hours[kind] = lost_gpu_hours.get(kind, 0.0) + state.lost_gpu_s / 3600
    for kind, row in table.items():
        row["preempted"] = preempted[kind]
        row["lost_gpu_hours"] = round(lost_gpu_hours[kind], 2)
    return table


def _kind(spec: SimJob) -> str:
    return spec.kind or spec.workload_class


def _wait_stats(values: list[float]) -> dict[str, object]:
    return {"wait_p50_s": _seconds(percentile(values, 0.5)), "wait_p90_s": _seconds(percentile(values, 0.9))}


def _hourly(engine: Engine) -> list[dict[str, float]]:
    rows = []
    start, end = engine.inputs.warmup_s, engine.horizon
    for hour in sorted(engine.ledger.hourly):
        length = min(3600.0, end - (start + hour * 3600))
        funded, unfunded, healthy = (value / length for value in engine.ledger.hourly[hour])
        rows.append({"hour": hour, "funded": funded, "unfunded": unfunded, "healthy": healthy})
    return rows


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _seconds(value: float | None) -> float | None:
    return _rounded(value, 1)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
