"""The pending queue grouped as a pass reads it: per (allocation, user) in submit order, the held
work apart, and the queued work by kind (what the walk's shortcuts read of a workload). A pass
groups the snapshot's pending work once (``group_pending``), or is handed the grouping by a caller
that keeps it from pass to pass (the simulator) or plans many variants of one snapshot (options.py).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import chain
from operator import attrgetter

from scheduling.policy.types import AllocationPath, PendingWorkload, WorkloadId

SUBMIT_ORDER = attrgetter("submitted_at", "id")
# What the walk's shortcuts read of a queued workload besides its allocation (shortcuts.py: its
# shape, whether it is short work, whether it may backfill reserved nodes): two workloads of one
# allocation alike in these are alike to them. A rule that reads more of a workload adds it here.
KIND = attrgetter("gpus", "gpus_per_node", "gpu_type", "workload_class", "min_runtime_s", "max_runtime_s")
# allocation -> kind (``KIND``) -> the queued workloads of that kind, by id
Kinds = dict[AllocationPath, dict[tuple, dict[WorkloadId, PendingWorkload]]]
# (allocation, user) -> queued workloads in (submitted_at, id) order; held workloads in that order;
# the queued workloads by kind
Grouped = tuple[dict[tuple[AllocationPath, str], list[PendingWorkload]], list[PendingWorkload], Kinds]


def add_kind(kinds: Kinds, workload: PendingWorkload) -> None:
    """File queued ``workload`` in ``kinds`` under its allocation and kind."""
    kind = KIND(workload)
    by_kind = kinds.get(workload.allocation)
    if by_kind is None:
        kinds[workload.allocation] = {kind: {workload.id: workload}}
    elif kind in by_kind:
        by_kind[kind][workload.id] = workload
    else:
        by_kind[kind] = {workload.id: workload}


def remove_kind(kinds: Kinds, workload: PendingWorkload) -> None:
    """Take ``workload`` (filed by ``add_kind``) out of ``kinds``; emptied entries go too."""
    by_kind = kinds[workload.allocation]
    kind = KIND(workload)
    of_kind = by_kind[kind]
    del of_kind[workload.id]
    if not of_kind:
        del by_kind[kind]
        if not by_kind:
            del kinds[workload.allocation]


def group_pending(pending: Sequence[PendingWorkload]) -> Grouped:
    """One pass: (allocation, user) -> queued workloads in submit order, the held ones, and the
    queued ones by kind."""
    grouped: dict[tuple[AllocationPath, str], list[PendingWorkload]] = {}
    held: list[PendingWorkload] = []
    kinds: Kinds = {}
    # Checked in the same loop: the workloads lie in memory in creation order, not submit order,
    # so a second walk over them would wait on memory about as long as this one.
    in_order, last = True, -math.inf
    for workload in pending:
        submitted = workload.submitted_at
        if not last < submitted:  # ties too: only the id could order them
            in_order = False
        last = submitted
        if workload.held:
            held.append(workload)
            continue
        key = (workload.allocation, workload.user)
        queue = grouped.get(key)
        if queue is None:
            grouped[key] = [workload]
        else:
            queue.append(workload)
        add_kind(kinds, workload)
    if not in_order:  # else grouping kept (submitted_at, id)
        for queue in grouped.values():
            queue.sort(key=SUBMIT_ORDER)
        held.sort(key=SUBMIT_ORDER)
    return grouped, held, kinds


def swap_grouped(grouped: Grouped, old: PendingWorkload, new: PendingWorkload) -> Grouped:
    """``group_pending``'s result with queued ``old`` replaced by ``new`` (same id and submit time,
    perhaps another allocation), without regrouping everything; every list is a fresh copy."""
    groups = {key: list(queue) for key, queue in grouped[0].items()}
    key = (old.allocation, old.user)
    queue = groups[key]
    del queue[next(at for at, workload in enumerate(queue) if workload is old)]
    if not queue:
        del groups[key]
    queue = groups.setdefault((new.allocation, new.user), [])
    queue.insert(bisect_left(queue, SUBMIT_ORDER(new), key=SUBMIT_ORDER), new)
    return groups, list(grouped[1]), kinds_after(grouped[2], [old], [new])


def kinds_after(kinds: Kinds, gone: Iterable[PendingWorkload], back: Iterable[PendingWorkload]) -> Kinds:
    """``kinds`` less ``gone`` (those of them it files: a workload started from elsewhere is not
    there) plus ``back``. ``kinds`` is not changed: the entries that change are copies."""
    gone = [
        workload
        for workload in gone
        if workload.id in kinds.get(workload.allocation, {}).get(KIND(workload), {})
    ]
    back = list(back)
    touched = {(workload.allocation, KIND(workload)) for workload in chain(gone, back)}
    kinds = dict(kinds)
    for allocation in {allocation for allocation, _ in touched}:
        kinds[allocation] = dict(kinds.get(allocation, {}))
    for allocation, kind in touched:
        if kind in kinds[allocation]:
            kinds[allocation][kind] = dict(kinds[allocation][kind])
    for workload in gone:
        remove_kind(kinds, workload)
    for workload in back:
        add_kind(kinds, workload)
    return kinds
