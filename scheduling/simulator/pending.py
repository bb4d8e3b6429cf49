"""The pending queue grouped the way the policy groups it, kept up to date per change.

A pass would otherwise regroup every pending workload (``queues.group_pending``) although only a
few arrived or started since the last one. :class:`PendingGroups` keeps exactly what
``group_pending(pending)`` returns for the engine's pending work, in the engine's queueing order:

- (allocation, user) -> that user's queued workloads in (submitted_at, id) order, the keys in order
  of their first workload in the pending order (dict order can reach the policy's tie-breaks);
- the held workloads, in (submitted_at, id) order;
- the queued workloads by allocation and kind (``grouping.KIND``), so the walk's shortcuts read one
  workload of each kind instead of the whole queue.

The pass reads these lists and never changes them (``plan_grouped``'s contract, which
``tests/simulator/test_pending.py`` checks pass by pass), so they are handed over without a copy.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from scheduling.policy import PendingWorkload
from scheduling.policy.grouping import SUBMIT_ORDER, Grouped, Kinds, add_kind, remove_kind


class PendingGroups:
    """``group_pending`` of a queue that only grows at its end and shrinks anywhere."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], list[PendingWorkload]] = {}
        self.held: list[PendingWorkload] = []
        self.kinds: Kinds = {}
        self._queued = 0  # workloads queued so far: each one's place in the pending order
        self._place: dict[int, int] = {}  # workload id -> its place in the pending order
        self._first: dict[tuple[str, str], int] = {}  # key -> the place of its first workload
        self._reorder = False  # a key's first workload left while others stayed: order by _first

    def add(self, workload: PendingWorkload) -> None:
        """Queue ``workload`` at the end of the pending order."""
        self._queued += 1
        self._place[workload.id] = self._queued
        if workload.held:
            insort(self.held, workload, key=SUBMIT_ORDER)
            return
        add_kind(self.kinds, workload)
        key = (workload.allocation, workload.user)
        queue = self.groups.get(key)
        if queue is None:  # it comes last in the pending order, so its key does too
            self.groups[key] = [workload]
            self._first[key] = self._queued
        else:
            insort(queue, workload, key=SUBMIT_ORDER)

    def remove(self, workload: PendingWorkload) -> None:
        """Take ``workload`` (queued by :meth:`add`) out of the queue."""
        place = self._place.pop(workload.id, None)
        if place is None:
            raise ValueError(f"workload {workload.id} is not queued")
        if workload.held:
            _delete(self.held, workload)
            return
        key = (workload.allocation, workload.user)
        queue = self.groups[key]
        _delete(queue, workload)
        remove_kind(self.kinds, workload)
        if not queue:  # the other keys keep their order
            del self.groups[key], self._first[key]
        elif self._first[key] == place:  # the key now appears later in the pending order
            places = self._place
            self._first[key] = min(places[queued.id] for queued in queue)
            self._reorder = True

    def grouped(self) -> Grouped:
        """What ``group_pending`` returns for the pending workloads in the order they were queued
        (the caller must not change it; the next change here may change it)."""
        if self._reorder:
            self._reorder = False
            groups, first = self.groups, self._first
            self.groups = {key: groups[key] for key in sorted(groups, key=first.__getitem__)}
        return self.groups, self.held, self.kinds


def _delete(queue: list[PendingWorkload], workload: PendingWorkload) -> None:
    at = bisect_left(queue, SUBMIT_ORDER(workload), key=SUBMIT_ORDER)
    if at == len(queue) or queue[at] is not workload:
        raise ValueError(f"workload {workload.id} is not queued")
    del queue[at]
