"""A tiny stand-in planner for engine tests: first come first served, first fit, no preemption;
and ``tiny_input``, the hand-sized inputs those tests replay.

It knows nothing of budgets; it only lets the engine's bookkeeping be checked by hand.
Jobs larger than a node take whole nodes; work that does not fit is skipped, not waited for.
"""

from __future__ import annotations

from scheduling.policy import Plan, PolicyConfig, Snapshot, Start
from scheduling.simulator import SimulationInput

DAY = 86400.0


def tiny_input(jobs, *, nodes, tree, seconds, outages=()) -> SimulationInput:  # noqa: ANN001
    """A simulation input of ``jobs`` on ``nodes`` under the budget ``tree``, ``seconds`` long."""
    return SimulationInput(
        name="tiny",
        cluster_nodes=tuple(nodes),
        tree=tuple(tree),
        jobs=tuple(jobs),
        days=seconds / DAY,
        outages=tuple(outages),
    )


def first_come_first_served(snapshot: Snapshot, now: float, config: PolicyConfig) -> Plan:
    size = {node.name: node.gpus for node in snapshot.nodes if node.healthy}
    free = dict(size)
    for workload in snapshot.running:
        for name, gpus in workload.placement:
            if name in free:
                free[name] -= gpus
    starts = []
    for workload in sorted(snapshot.pending, key=lambda w: (w.submitted_at, w.id)):
        placement = _first_fit(free, size, workload.gpus)
        if placement:
            for name, gpus in placement:
                free[name] -= gpus
            starts.append(Start(workload.id, placement, now + workload.min_runtime_s, True))
    return Plan(tuple(starts), (), (), (), {}, {})


def _first_fit(free: dict[str, int], size: dict[str, int], gpus: int) -> tuple[tuple[str, int], ...]:
    node = next((name for name in sorted(free) if free[name] >= gpus), None)
    if node is not None:
        return ((node, gpus),)
    empty = [name for name in sorted(free) if free[name] == size[name]]
    taken, chosen = 0, []
    for name in empty:
        if taken >= gpus:
            break
        chosen.append((name, size[name]))
        taken += size[name]
    return tuple(chosen) if taken == gpus else ()
