"""A first-come first-served stand-in planner: the pass's mechanics tested apart from the policy."""

from __future__ import annotations

from scheduling.policy import PendingReason, Plan, PolicyConfig, ReasonCode, Snapshot, Start


def fifo_planner(snapshot: Snapshot, now: float, config: PolicyConfig) -> Plan:
    """Start pending work in (submitted, id) order on the fullest node that fits; no preemption."""
    free = {node.name: node.gpus for node in snapshot.nodes if node.healthy}
    for running in snapshot.running:
        for node, gpus in running.placement:
            free[node] = free.get(node, 0) - (gpus or running.gpus)
    starts, reasons = [], []
    for workload in sorted(snapshot.pending, key=lambda w: (w.submitted_at, w.id)):
        fits = sorted((gpus, name) for name, gpus in free.items() if gpus >= workload.gpus)
        if fits and not workload.held:
            name = fits[0][1]
            free[name] -= workload.gpus
            starts.append(
                Start(
                    workload_id=workload.id,
                    placement=((name, workload.gpus),),
                    protected_until=now + workload.min_runtime_s,
                    funded=True,
                )
            )
            continue
        code = ReasonCode.HELD if workload.held else ReasonCode.WAITING_FOR_GPUS
        reasons.append(
            PendingReason(
                workload_id=workload.id,
                code=code,
                params={"gpus": workload.gpus},
                message=f"needs {workload.gpus} GPUs on one node",
                position=len(reasons) + 1,
                estimated_start=None,
            )
        )
    return Plan(
        starts=tuple(starts),
        preemptions=(),
        reservations=(),
        reasons=tuple(reasons),
        fair_share={},
        timings_ms={"admit": 0.0},
    )
