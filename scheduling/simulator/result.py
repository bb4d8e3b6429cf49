"""Turn a finished engine into a :class:`SimulationResult`: the JSON summary and the report series.

Waits are per submission: submit -> first start, and for work ended by a preemption or a node
failure and submitted again by its owner, each resubmission -> its start as one more wait (the
owner waited twice). A submission that never started counts with the time it waited until the end
of the period (or until it was cancelled): a lower bound, so a policy that starves work cannot look
better by leaving it out. Requeue waits of resumable work (requeue -> restart) are reported apart.
Only jobs submitted inside the measured period count in the waits and job counts.

Goodput is the GPU-hours run inside the measured period minus the part of them whose work was
lost (the runs of non-resumable work ended by a preemption or a node failure; the part of a
resumable run since its last checkpoint): work that completed, was kept by a checkpoint, or is
still running at the end of the period.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.policy.rules import SHORT_CLASSES
from scheduling.simulator.engine import Engine, JobState
from scheduling.simulator.metrics import jain_index, percentile
from scheduling.simulator.model import SimJob

AT_95PCT = 0.95
# Size bands of the ``by_size`` table: (key, fewest GPUs, most GPUs).
SIZE_BANDS = (("1", 1, 1), ("2-7", 2, 7), ("8-63", 8, 63), ("64+", 64, None))


@dataclass
class SimulationResult:
    summary: dict[str, object]
    per_team: list[dict[str, object]] = field(default_factory=list)
    hourly: list[dict[str, float]] = field(default_factory=list)  # hour -> mean GPUs funded/unfunded/healthy
    waits_by_class: dict[str, list[float]] = field(default_factory=dict)  # per submission
    waits_by_size: dict[str, list[float]] = field(default_factory=dict)  # per size band, per submission

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
    waits = {state.spec.id: submission_waits(state, engine.horizon) for state in measured}
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
        **_outcomes(engine, measured, waits),
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
        waits_by_size=_in_band_order(_group_waits(measured, waits, size_band)),
    )


def _measured_jobs(engine: Engine) -> list[JobState]:
    start, end = engine.inputs.warmup_s, engine.horizon
    return [state for state in engine.jobs.values() if start <= state.spec.submit_s < end]


def submission_waits(state: JobState, horizon: float) -> list[float]:
    """One wait per submission: submit -> first start (or -> cancelled / the end of the period
    if it never started), then each resubmission -> its start (or -> the end of the period)."""
    if state.first_start is not None:
        first = state.first_start - state.spec.submit_s
    else:
        first = (state.ended_at if state.ended_at is not None else horizon) - state.spec.submit_s
    waits = [first, *state.resubmit_waits]
    if state.resubmitted_at is not None:
        waits.append(horizon - state.resubmitted_at)
    return waits


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


def _queue(engine: Engine, measured: list[JobState], waits: dict[int, list[float]]) -> dict[str, object]:
    counters = engine.counters
    requeue_waits = [wait for state in measured for wait in state.requeue_waits]
    statuses = [state.status for state in measured]
    return {
        **_wait_stats([wait for state in measured for wait in waits[state.spec.id]]),
        **{f"funded_{key}": value for key, value in _wait_stats(_funded_waits(measured, waits)).items()},
        "requeue_wait_p50_s": _seconds(percentile(requeue_waits, 0.5)),
        "requeue_wait_p90_s": _seconds(percentile(requeue_waits, 0.9)),
        "by_class": _band_table(measured, waits, lambda spec: spec.workload_class),
        "by_size": _band_table(measured, waits, size_band, order=[band[0] for band in SIZE_BANDS]),
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


def _funded_waits(measured: list[JobState], waits: dict[int, list[float]]) -> list[float]:
    return [wait for state in measured if state.funded for wait in waits[state.spec.id]]


def size_band(spec: SimJob) -> str:
    """The ``by_size`` band of a job: ``1``, ``2-7``, ``8-63`` or ``64+`` GPUs."""
    for key, low, high in SIZE_BANDS:
        if spec.gpus >= low and (high is None or spec.gpus <= high):
            return key
    return SIZE_BANDS[0][0]  # (no job asks for fewer than one GPU)


def _band_table(
    measured: list[JobState],
    waits: dict[int, list[float]],
    label: Callable[[SimJob], str],
    order: list[str] | None = None,
) -> dict[str, dict[str, object]]:
    """Per group of jobs (a class, a size band): jobs submitted, waits per submission, funded waits,
    jobs that never started. ``order`` lists the groups to show even when empty (in that order)."""
    groups: dict[str, list[JobState]] = {name: [] for name in order or []}
    for state in measured:
        groups.setdefault(label(state.spec), []).append(state)
    names = list(groups) if order else sorted(groups)
    table: dict[str, dict[str, object]] = {}
    for name in names:
        states = groups[name]
        funded = _funded_waits(states, waits)
        table[name] = {
            "jobs": len(states),
            **_wait_stats([wait for state in states for wait in waits[state.spec.id]]),
            "funded_wait_p50_s": _seconds(percentile(funded, 0.5)),
            "funded_wait_p90_s": _seconds(percentile(funded, 0.9)),
            "never_started": sum(state.first_start is None for state in states),
        }
    return table


def _outcomes(engine: Engine, measured: list[JobState], waits: dict[int, list[float]]) -> dict[str, object]:
    """What the owners got: jobs completed, work kept and lost, churn, short work's waits, and the
    occupancy while work waited for GPUs (see the module docstrings here and in metrics.py)."""
    counters, totals = engine.counters, engine.ledger.totals
    assigned = totals.get("funded", 0.0) + totals.get("unfunded", 0.0)
    short = [
        wait
        for state in measured
        if state.funded and state.spec.workload_class in SHORT_CLASSES
        for wait in waits[state.spec.id]
    ]
    return {
        "jobs_completed": counters["completions"],
        "funded_jobs_completed": counters["funded_completions"],
        "assigned_gpu_hours": round(assigned / 3600, 1),
        "goodput_gpu_hours": round((assigned - counters["lost_in_period_gpu_s"]) / 3600, 1),
        "lost_gpu_hours_by_cause": {
            "preemption": round(counters["lost_gpu_s"] / 3600, 2),
            "node_failure": round(counters["node_failure_lost_gpu_s"] / 3600, 2),
        },
        "preemptions_per_1000_gpu_hours": (
            round(counters["preemptions"] / (assigned / 3600 / 1000), 3) if assigned else None
        ),
        "resubmissions": counters["resubmissions"],
        "resubmit_delay_s": engine.resubmit_delay_s,
        "funded_debug_interactive_wait_p90_s": _seconds(percentile(short, 0.9)),
        "occupancy_when_contended": _ratio(
            totals.get("contended_assigned", 0.0), totals.get("contended_healthy", 0.0)
        ),
        "contended_share": _ratio(totals.get("contended_healthy", 0.0), totals.get("healthy", 0.0)),
    }


def _plan_times(engine: Engine, wall_s: float) -> dict[str, object]:
    milliseconds = [seconds * 1000 for seconds in engine.plan_seconds]
    return {
        "passes": engine.counters["passes"],
        "plan_ms_p50": _rounded(percentile(milliseconds, 0.5), 3),
        "plan_ms_p95": _rounded(percentile(milliseconds, 0.95), 3),
        "plan_s_total": round(sum(engine.plan_seconds), 3),
        "sim_wall_s": round(wall_s, 3),
    }


def _group_waits(
    measured: list[JobState], waits: dict[int, list[float]], label: Callable[[SimJob], str]
) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for state in measured:
        groups.setdefault(label(state.spec), []).extend(waits[state.spec.id])
    return dict(sorted(groups.items()))


def _in_band_order(groups: dict[str, list[float]]) -> dict[str, list[float]]:
    return {key: groups[key] for key, _, _ in SIZE_BANDS if key in groups}


def _wait_table(groups: dict[str, list[float]]) -> dict[str, dict[str, object]]:
    return {name: {"jobs": len(values), **_wait_stats(values)} for name, values in groups.items()}


def _kind_table(measured: list[JobState], waits: dict[int, list[float]]) -> dict[str, dict[str, object]]:
    """Per scenario kind (debug, batch, sweep, ...): waits, how often it was preempted, what that lost.

    (Preemptions of jobs submitted before the measured period count in the totals, not here.)"""
    table = _wait_table(_group_waits(measured, waits, _kind))
    jobs: dict[str, int] = {}
    preempted: dict[str, int] = {}
    lost_gpu_hours: dict[str, float] = {}
    for state in measured:
        kind = _kind(state.spec)
        jobs[kind] = jobs.get(kind, 0) + 1
        preempted[kind] = preempted.get(kind, 0) + state.preempted
        lost_gpu_hours[kind] = lost_gpu_hours.get(kind, 0.0) + state.lost_gpu_s / 3600
    for kind, row in table.items():
        row["jobs"] = jobs[kind]  # jobs, not submissions
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
