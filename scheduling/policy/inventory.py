"""What a pass reads off the nodes and the running work before it decides anything: the node
facts (kept per nodes tuple in a planning session), whether a shape could ever fit the healthy
nodes, and the running work filed afresh (what filing.py carries when it can)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduling.policy.filing import Filed
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.rules import work_lost
from scheduling.policy.types import ClusterNodeSpec, RunningWorkload

if TYPE_CHECKING:
    from scheduling.policy.session import PlanningSession


def node_facts(nodes: tuple, session: PlanningSession) -> tuple:
    """(healthy nodes, name -> GPUs of each healthy node, GPU type -> node size -> healthy nodes,
    name -> GPU type): read-only, built once per nodes tuple in a session (a caller that plans one
    cluster many times, the simulator or start options, passes the same tuple until a node changes)."""
    if not isinstance(nodes, tuple):
        return _read_nodes(nodes)
    return session.node_facts.get(nodes, lambda: _read_nodes(nodes))


def _read_nodes(nodes) -> tuple:  # noqa: ANN001 - a sequence of ClusterNodeSpec
    healthy = [node for node in nodes if node.healthy]
    sizes: dict[str, dict[int, int]] = {}
    for node in healthy:
        by_size = sizes.setdefault(node.gpu_type, {})
        by_size[node.gpus] = by_size.get(node.gpus, 0) + 1
    return (
        healthy,
        {node.name: node.gpus for node in healthy},
        sizes,
        {node.name: node.gpu_type for node in nodes},
    )


def fits_inventory(shape: Shape, sizes: dict[str, dict[int, int]]) -> bool:
    """Could ``shape`` ever fit the healthy nodes (all of them free)? ``sizes``: type -> size -> count."""
    gpus, per_node, gpu_type = shape
    if gpus <= 0:
        return False
    found = [
        (size, count)
        for kind, by_size in sizes.items()
        if gpu_type in (None, kind)
        for size, count in by_size.items()
    ]
    if per_node is not None and per_node < gpus:
        return (
            gpus % per_node == 0
            and sum(count for size, count in found if size >= per_node) >= gpus // per_node
        )
    if any(size >= gpus for size, _ in found):
        return True
    if per_node is not None:
        return False
    return any(
        size and gpus % size == 0 and count >= gpus // size
        for kind, by_size in sizes.items()
        if gpu_type in (None, kind)
        for size, count in by_size.items()
    )


def file_afresh(
    running: Sequence[RunningWorkload],
    healthy: list[ClusterNodeSpec],
    capacity: dict[str, int],
    ancestors: dict[str, tuple[str, ...]],
    limit: dict[str, int],
    now: float,
) -> Filed:
    """File the running work afresh: (occupants, candidates, used, index, start index, no
    release keys, no kept node needs, candidates in preemption order)."""
    free = dict(capacity)
    occupants: dict[str, list[RunningWorkload]] = {}
    # (allocation, funded) -> running work that may become a victim, least work lost first
    candidates: dict[tuple[str, bool], list[RunningWorkload]] = {}
    used: dict[str, int] = dict.fromkeys(limit, 0)
    on_node, left_on, victims_of = occupants.get, free.get, candidates.get
    for workload in running:
        for name, gpus in workload.placement:
            here = on_node(name)
            if here is None:
                occupants[name] = [workload]
            else:
                here.append(workload)
            left = left_on(name)
            if left is not None:
                free[name] = left - gpus if left > gpus else 0
        if used:  # concurrency limits: GPUs in use per limited node
            for path in ancestors.get(workload.allocation, ()):
                if path in used:
                    used[path] += workload.gpus
        if workload.started_at < now:  # never preempt work at the instant it starts
            key = (workload.allocation, workload.funded)
            victims = victims_of(key)
            if victims is None:
                candidates[key] = [workload]
            else:
                victims.append(workload)
    index = FreeIndex.filed(healthy, free)  # each node filed once, at what is left free
    for listed in candidates.values():
        listed.sort(key=lambda workload: work_lost(workload, now))
    start_index = index.copy()  # free before this pass
    return occupants, candidates, used, index, start_index, None, None, True
