"""The cluster's scheduling order as a queue the admit walk pops from.

``FairShareQueue`` re-ranks after every admission (the projected charge moves the admitted
allocation down), so it descends the tree from the root each time it must choose again; after a
workload that could not start it simply continues with the same (allocation, user), since nothing
was charged. ``StaticQueue`` serves the "priority" and "fifo" orderings, which never re-rank.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from heapq import heapify, heappop, heappush
from itertools import chain

from scheduling.policy.grouping import Kinds
from scheduling.policy.ranking import ROOT, FairTree
from scheduling.policy.types import AllocationPath, PendingWorkload

SortKey = Callable[[PendingWorkload], tuple]


def submit_key(workload: PendingWorkload) -> tuple[float, int]:
    return (workload.submitted_at, workload.id)


def priority_key(workload: PendingWorkload) -> tuple[int, float, int]:
    return (-workload.priority, workload.submitted_at, workload.id)


def _insert_in_order(queue: deque[PendingWorkload], workload: PendingWorkload, key: SortKey) -> None:
    wanted = key(workload)
    position = next((i for i, queued in enumerate(queue) if key(queued) > wanted), len(queue))
    queue.insert(position, workload)


# allocation -> user -> that user's queue. A user's queue stays the caller's list (never changed
# here) until the walk first takes from it or a victim is requeued into it: then it becomes a deque
# of its own. A settling walk that leaves most queues untried thus copies only the few it serves.
_ByAllocation = dict[AllocationPath, dict[str, deque[PendingWorkload] | list[PendingWorkload]]]


def _by_allocation(
    groups: dict[tuple[AllocationPath, str], list[PendingWorkload]],
) -> tuple[_ByAllocation, dict[AllocationPath, int]]:
    """``groups`` as allocation -> user -> queue (allocations and users in the groups' order), and
    the workloads queued per allocation."""
    by_allocation: _ByAllocation = {}
    for (allocation, user), queue in groups.items():
        users = by_allocation.get(allocation)
        if users is None:
            by_allocation[allocation] = {user: queue}
        else:
            users[user] = queue
    # counted per allocation, not per (allocation, user): most allocations queue many users' work
    queued = {allocation: sum(map(len, users.values())) for allocation, users in by_allocation.items()}
    return by_allocation, queued


class FairShareQueue:
    """Pending workloads grouped per (allocation, user), served in live Fair Tree order."""

    def __init__(
        self,
        tree: FairTree,
        groups: dict[tuple[AllocationPath, str], list[PendingWorkload]],
        kinds: Kinds | None = None,
    ) -> None:
        """``groups``: (allocation, user) -> workloads in (submitted_at, id) order; ``kinds``: the
        same workloads by kind, or None if not known (see ``group_pending``)."""
        self._start(tree, *_by_allocation(groups), kinds)
        self.funded: bool | None = None  # its allocations: funded ones only, unfunded only, or any

    @classmethod
    def funded_and_unfunded(
        cls,
        tree: FairTree,
        groups: dict[tuple[AllocationPath, str], list[PendingWorkload]],
        kinds: Kinds | None = None,
    ) -> list[FairShareQueue]:
        """``[FairShareQueue(tree, funded groups), FairShareQueue(tree, the other groups)]``, from
        one walk over ``groups`` (a pass builds both, once per walk)."""
        by_allocation, queued = _by_allocation(groups)
        sides: tuple[_ByAllocation, _ByAllocation]
        funded, sides = tree.funded, ({}, {})
        for allocation, users in by_allocation.items():  # (each side keeps the groups' order)
            sides[allocation not in funded][allocation] = users
        queues = []
        for side, funded_side in zip(sides, (True, False), strict=True):
            queue = cls.__new__(cls)
            queue._start(tree, side, queued, kinds)
            queue.funded = funded_side
            queues.append(queue)
        return queues

    def _start(
        self,
        tree: FairTree,
        by_allocation: _ByAllocation,
        queued: dict[AllocationPath, int],
        kinds: Kinds | None,
    ) -> None:
        """Serve ``by_allocation``; ``queued``: allocation -> its workloads, ``kinds``: them by kind
        (for at least those allocations; None: not known)."""
        self.tree = tree
        self.kinds = kinds  # until the queue changes (``alike``)
        self.counts: dict[AllocationPath, int]
        self.by_allocation, self.counts = by_allocation, {}
        for allocation in by_allocation:
            self._count(allocation, queued[allocation])
        self.current: tuple[AllocationPath, str, deque[PendingWorkload] | list[PendingWorkload]] | None = None
        # allocation -> [heap of (usage, user), how much of tree.user_log[allocation] it has seen]
        self.user_heaps: dict[AllocationPath, list] = {}
        # The last descent, root first, and the tree's usage version it was made in (see _select).
        self.path: list[AllocationPath] = []
        self.seen = -1

    def _count(self, allocation: AllocationPath, amount: int) -> None:
        for node in self.tree.ancestors[allocation]:
            self.counts[node] = self.counts.get(node, 0) + amount
        self.counts[ROOT] = self.counts.get(ROOT, 0) + amount

    def head(self) -> tuple[AllocationPath, str, deque[PendingWorkload]] | None:
        """The (allocation, user, queue) to serve next; the caller pops from the queue, then
        reports how many it took with ``consumed``."""
        current = self.current
        if current is None:
            current = self._select()
            if current is None:
                return None
        allocation, user, queue = current
        if type(queue) is not deque:  # the walk takes from it: a copy of its own
            queue = self.by_allocation[allocation][user] = deque(queue)
            current = (allocation, user, queue)
        self.current = current
        return current  # type: ignore[return-value]  # its queue was made a deque just above

    def consumed(self, count: int) -> None:
        assert self.current is not None  # set by head, which the caller called first
        allocation, user, queue = self.current
        self._count(allocation, -count)
        if count:
            self.kinds = None
        if not queue:
            del self.by_allocation[allocation][user]
            self.current = None

    def skip(self, passed_over: Callable[[Sequence[PendingWorkload]], bool], enough: float) -> int:
        """Take whole user queues, in serving order, while ``passed_over`` says the walk would take
        every workload in the next one and change nothing (so the standing and order hold); stop
        before the first it would not, or once ``enough`` were taken. Returns how many were taken
        (what ``head`` and ``consumed`` would have handed out and counted, without the copies).
        While no usage changed, the chosen allocation's next user is its least used one
        (``_select`` would resume there), so its users are taken one after another."""
        taken = 0
        counts, ancestors, tree, path = self.counts, self.tree.ancestors, self.tree, self.path
        while True:
            current = self.current
            if current is None:
                current = self.current = self._select()
                if current is None:
                    return taken
            allocation, user, queue = current
            if not passed_over(queue):
                return taken
            users = self.by_allocation[allocation]
            resumes = self.seen == tree.version and path and path[-1] == allocation
            count, heap = 0, None
            while True:
                count += len(queue)
                del users[user]
                if not (users and resumes) or taken + count >= enough:
                    self.current = None
                    break
                if heap is None:
                    made = len(users) > 1  # else no heap is made (nor brought up to date)
                    user = self._least_used(allocation, users)
                    if made:
                        heap, usage = self.user_heaps[allocation][0], tree.user_usage
                else:  # _least_used, its heap up to date: nothing was charged since
                    while True:
                        used, user = heap[0]
                        if user in users and usage.get((allocation, user), 0.0) == used:
                            break
                        heappop(heap)
                queue = users[user]
                if not passed_over(queue):
                    self.current = (allocation, user, queue)
                    break
            for node in ancestors[allocation]:
                counts[node] -= count
            counts[ROOT] -= count
            taken += count
            self.kinds = None
            if self.current is not None or taken >= enough:
                return taken

    def charged(self) -> None:
        """Standing changed (an admission or a preemption): choose afresh at the next pop."""
        self.current = None

    def requeue(self, workload: PendingWorkload) -> None:
        """Put a preempted workload back in its place (by submit time), in the deque in place:
        the walk may be draining that very deque. The caller re-ranks with ``charged`` next."""
        if workload.allocation not in self.tree.ancestors:
            return
        users = self.by_allocation.setdefault(workload.allocation, {})
        queue = users.get(workload.user)
        if queue is None:
            queue = users[workload.user] = deque()
        elif type(queue) is not deque:
            queue = users[workload.user] = deque(queue)
        _insert_in_order(queue, workload, submit_key)
        self.kinds = None
        self._count(workload.allocation, 1)
        self.path.clear()  # a subtree passed over for being empty may be the best one now
        state = self.user_heaps.get(workload.allocation)
        if state is not None:
            heappush(state[0], (self.tree.user_key(workload.allocation, workload.user), workload.user))

    def _select(self) -> tuple[AllocationPath, str, deque[PendingWorkload] | list[PendingWorkload]] | None:
        """Descend from the root to the best allocation with queued work (its user's queue may
        still be the caller's list: ``head`` copies it).

        While no usage changed since the last descent and nothing was requeued, only counts fell:
        every child the last descent chose is still the best of its (fewer) eligible siblings,
        and the nodes it passed had no queue of their own. So the descent resumes from the
        deepest node on that path that still has work queued, with the same result."""
        counts = self.counts
        if not counts.get(ROOT):
            return None
        tree, path = self.tree, self.path
        if path and self.seen == tree.version:
            while not counts.get(path[-1]):
                path.pop()  # the root stays: it has work queued
        else:
            path[:] = (ROOT,)
            self.seen = tree.version
        node = path[-1]
        while True:
            users = self.by_allocation.get(node)
            if users:
                user = self._least_used(node, users)
                return node, user, users[user]
            child = tree.best_child(node, counts)
            if child is None:
                path.clear()
                return None
            path.append(child)
            node = child

    def _least_used(
        self, allocation: AllocationPath, users: dict[str, deque[PendingWorkload] | list[PendingWorkload]]
    ) -> str:
        """The user with the least usage (ties by name), as ``min`` over ``(usage, name)`` would
        pick, from a heap kept per allocation: an entry is pushed whenever a user's usage changes
        (the tree logs every charge) or a user joins, and entries that no longer hold are dropped."""
        if len(users) == 1:  # the least used of one: no heap needed (one made later reads the log)
            for name in users:
                return name
        tree = self.tree
        log = tree.user_log.get(allocation, ())
        state = self.user_heaps.get(allocation)
        if state is None:
            usage = tree.user_usage
            heap = [(usage.get((allocation, name), 0.0), name) for name in users]
            heapify(heap)
            state = self.user_heaps[allocation] = [heap, len(log)]
        elif state[1] < len(log):
            heap = state[0]
            usage = tree.user_usage
            for name in log[state[1] :]:
                if name in users:
                    heappush(heap, (usage.get((allocation, name), 0.0), name))
            state[1] = len(log)
        heap = state[0]
        usage = tree.user_usage
        while True:
            used, name = heap[0]
            if name in users and usage.get((allocation, name), 0.0) == used:
                return name
            heappop(heap)

    def allocations(self) -> list[AllocationPath]:
        return [allocation for allocation, users in self.by_allocation.items() if users]

    def funded_allocations(self) -> list[AllocationPath]:
        """Those of ``allocations`` that are funded (none or all of them, for a side of a pair)."""
        if self.funded is None:
            return list(filter(self.tree.funded.__contains__, self.allocations()))
        return self.allocations() if self.funded else []

    def queued(self) -> Iterator[PendingWorkload]:
        """What is still queued, in no particular order (cheaper than ``remaining``)."""
        return chain.from_iterable(map(chain.from_iterable, map(dict.values, self.by_allocation.values())))

    def alike(self) -> list[PendingWorkload] | None:
        """One queued workload of each (allocation, kind) (``grouping.KIND``), or None when not known: the
        kinds were not handed in, or the walk has taken from the queue or put a victim back."""
        kinds = self.kinds
        if kinds is None:
            return None
        return [
            next(iter(of_kind.values()))
            for allocation in self.by_allocation
            for of_kind in kinds[allocation].values()
        ]

    def remaining_groups(self) -> Iterator[tuple[AllocationPath, Sequence[PendingWorkload]]]:
        """(allocation, queued workloads of one user) in the current Fair Tree order (read only)."""
        for allocation in self.tree.ordered(a for a, users in self.by_allocation.items() if users):
            users = self.by_allocation[allocation]
            for user in sorted(users, key=lambda name: (self.tree.user_key(allocation, name), name)):
                yield allocation, users[user]

    def remaining(self) -> Iterator[PendingWorkload]:
        """What is still queued, in the current Fair Tree order."""
        for allocation in self.tree.ordered(a for a, users in self.by_allocation.items() if users):
            users = self.by_allocation[allocation]
            for user in sorted(users, key=lambda name: (self.tree.user_key(allocation, name), name)):
                yield from users[user]


class StaticQueue:
    """A fixed order: (priority desc, submit, id) or (submit, id)."""

    def __init__(self, workloads: Iterable[PendingWorkload], key: SortKey) -> None:
        self.key = key
        self.items = deque(sorted(workloads, key=key))

    def head(self) -> tuple[None, None, deque[PendingWorkload]] | None:
        return (None, None, self.items) if self.items else None

    def consumed(self, count: int) -> None:
        return None

    def skip(self, passed_over: Callable[[Sequence[PendingWorkload]], bool], enough: float) -> int:
        return 0  # one queue of everything: the walk reads it workload by workload

    def charged(self) -> None:
        return None

    def requeue(self, workload: PendingWorkload) -> None:
        _insert_in_order(self.items, workload, self.key)

    def allocations(self) -> list[AllocationPath]:
        return sorted({workload.allocation for workload in self.items})

    def remaining(self) -> Iterator[PendingWorkload]:
        return iter(list(self.items))

    def queued(self) -> Iterator[PendingWorkload]:
        return iter(self.items)

    def alike(self) -> None:
        return None  # read ``queued``

    def remaining_groups(self) -> Iterator[tuple[AllocationPath, list[PendingWorkload]]]:
        for workload in list(self.items):
            yield workload.allocation, [workload]
