"""One walk of the admit phase (DESIGN 5 step 4): the order drained, head queue by head queue.

A pass walks its order (``planner._Pass._admit``) once, then again while a walk changed anything.
Each walk takes the head (allocation, user) queue's workloads in order and tries each one
(``_Pass.consider``: place it, else preempt for it, else reserve for it, else record why it
waits) until one starts, which moves the standing and so the head.

A workload like one that already failed (the same ``Signature``) fails the same way until GPUs
may come free or the reservation changes (the pass's ``relief``; a start only takes GPUs), so it
reuses that outcome instead of searching again: that keeps a pass over 100,000 pending workloads
cheap. When nothing is recorded, the walk does not even take such workloads one by one
(``FastSkip``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from scheduling.policy.grouping import SUBMIT_ORDER
from scheduling.policy.outcome_keys import NoCapacity, OutcomeKey
from scheduling.policy.rules import INFINITE, backfill_test, cannot_delay, is_short, short_work_apart
from scheduling.policy.types import AllocationPath, PendingWorkload, PolicyConfig

if TYPE_CHECKING:
    from scheduling.policy.planner import _Pass

CHECK_AFTER_MISSES = 32  # workloads tried in a row without a start before asking whether any could


# What decides how a workload fails while nothing frees up: (GPUs, GPUs per node, GPU type: its
# shape; allocation: its funding, standing and limits; priority; may it use reserved nodes, as
# far as the workload decides it: ``rules.backfill_test``; is it short work, which has a lane and
# its own ``rules.loss_allowance``: ``rules.is_short``, False where nothing treats short
# work apart, ``rules.short_work_apart``). A plain tuple: the walk builds one for nearly every
# pending workload, and a NamedTuple's construction measured 0.38 us more each here (0.45
# against 0.07 us; ~20 ms in a pass over 50,000 pending, ~110 ms of CPU; benchmarks.policy_pass).
Signature = tuple[int, int | None, str | None, AllocationPath, int, bool, bool]


def signature(
    workload: PendingWorkload,
    now: float,
    reservation_start: float,
    short: PolicyConfig | None,
    backfills: Callable[[PendingWorkload, float, float], bool] = cannot_delay,
) -> Signature:
    """``workload``'s signature while the reserved job starts at ``reservation_start``;
    ``short``: the configuration when the pass treats short work apart
    (``rules.short_work_apart``), else None; ``backfills``: the configuration's
    ``rules.backfill_test``."""
    return (
        workload.gpus,
        workload.gpus_per_node,
        workload.gpu_type,
        workload.allocation,
        workload.priority,
        backfills(workload, now, reservation_start),
        short is not None and is_short(workload, short),
    )


class Walk:
    """One walk over ``queues`` (see the module docstring), changing the pass it walks for.

    ``settles``: another walk follows if this one starts or preempts anything. Then, from its
    first start on, what this walk leaves blocked is never explained (the next walk's is), so it
    is not recorded; nor is anything when nothing is explained (``explain=False``)."""

    def __init__(self, planning: _Pass, queues: list, settles: bool) -> None:
        self.planning, self.queues, self.settles = planning, queues, settles
        self.failed: dict[Signature, OutcomeKey] = {}  # -> outcome key, valid while ``relief`` holds
        self.relief = planning.changes.relief
        self.reservation_start = planning.reserver.start_at()  # changes only with relief
        self.explained = planning.explain is not False
        self.unchanged = len(planning.starts)  # a preemption comes with a start
        self.waited = len(planning.blocked)
        # Victims go back into the first walk's queues (``_Pass._requeue``): only it meets them again.
        self.first, self.evicted = queues is planning.queues, len(planning.preemptor.preemptions)
        config = planning.config
        short = config if short_work_apart(config, planning.capacity.lane) else None  # see ``signature``
        self.skip = FastSkip(self.failed, planning.now, self.reservation_start, short, backfill_test(config))

    def run(self) -> None:
        for queue in self.queues:
            if not self._records() and self.planning.shortcuts.nothing_to_try(queue):
                continue
            self._walk_queue(queue)

    def _records(self) -> bool:
        """Is what this walk leaves blocked recorded from here on?"""
        return self.explained and not (self.settles and len(self.planning.starts) != self.unchanged)

    def _walk_queue(self, queue) -> None:  # noqa: ANN001 - a FairShareQueue or StaticQueue
        """Drain ``queue``; after every ``CHECK_AFTER_MISSES`` workloads tried in vain (once per
        generation), leave it as soon as nothing in it could start, preempt or reserve."""
        planning, misses, checked = self.planning, 0, -1
        while True:
            record = self._records()
            if not record and self.failed:
                due = CHECK_AFTER_MISSES - misses if checked != planning.changes.generation else INFINITE
                skipped = queue.skip(self.skip.passed_over, due)  # whole user queues of hits
                misses += skipped
                if skipped and misses >= CHECK_AFTER_MISSES and checked != planning.changes.generation:
                    checked = planning.changes.generation
                    if planning.shortcuts.nothing_more_can_start(queue, thorough=True):
                        return
            head = queue.head()
            if head is None:
                return
            taken, started = self._drain(head[2], record)
            queue.consumed(taken)
            if started:
                queue.charged()
                misses = 0
                continue
            misses += taken
            if misses >= CHECK_AFTER_MISSES and checked != planning.changes.generation:
                checked = planning.changes.generation
                if planning.shortcuts.nothing_more_can_start(queue, thorough=not record):
                    if record:
                        planning.leave_untried(queue)
                    return

    def _drain(self, items: deque[PendingWorkload], record: bool) -> tuple[int, bool]:
        """Try the head queue's workloads until one starts: (how many were taken, started?)."""
        taken = 0
        while items:
            if record:
                count, miss = self._next_recorded(items)
            else:
                count, miss = self.skip.leading_hits(items)
            taken += count
            if miss is None:
                break
            if self._try(*miss):
                return taken, True
        return taken, False

    def _next_recorded(self, items: deque[PendingWorkload]) -> tuple[int, tuple | None]:
        """Take workloads off ``items``, recording each like one that failed with that one's
        outcome, up to the first one unlike any: (how many were taken, (it, its signature))."""
        failed, (now, start, short, backfills) = self.failed, self.skip.context()
        append = self.planning.blocked.append
        taken = 0
        while items:
            workload = items.popleft()
            taken += 1
            found = signature(workload, now, start, short, backfills)
            key = failed.get(found)
            if key is None:
                return taken, (workload, found)
            append((workload, key))
        return taken, None

    def _try(self, workload: PendingWorkload, found: Signature) -> bool:
        """Try ``workload``; remember how it failed (for its signature) until relief."""
        planning = self.planning
        started = planning.consider(workload)
        if planning.changes.relief != self.relief:
            self.failed.clear()
            self.relief = planning.changes.relief
            self.reservation_start = self.skip.reservation_start = planning.reserver.start_at()
        if started:
            planning.tail_repeats = len(planning.blocked) == self.waited and (
                self.first or len(planning.preemptor.preemptions) == self.evicted
            )
            return True
        key = planning.blocked[-1][1]  # ``consider`` just added (workload, its key)
        if not (isinstance(key, NoCapacity) and key.reserved):  # the reserved one is like no other
            self.failed[found] = key  # type: ignore[assignment]  # a workload's entry: never None
        return False


class FastSkip:
    """The walk's strategy when it records nothing: workloads like ones that failed are not
    taken one by one but counted, and whole user queues of them are passed over at once.

    Taking them would change nothing (a hit records nothing and moves no standing), so the walk
    that skips them ends exactly where the walk that takes them would; only the count of the
    workloads taken (for the check after ``CHECK_AFTER_MISSES`` misses) is kept."""

    def __init__(
        self,
        failed: dict[Signature, OutcomeKey],
        now: float,
        reservation_start: float,
        short: PolicyConfig | None,
        backfills: Callable[[PendingWorkload, float, float], bool],
    ) -> None:
        self.short, self.backfills = short, backfills
        self.failed, self.now = failed, now  # the walk's own ``failed``: cleared, never replaced
        self.reservation_start = reservation_start  # kept in step by the walk

    def context(self) -> tuple:
        """What a signature reads besides the workload: (now, reservation start, short, backfill test)."""
        return self.now, self.reservation_start, self.short, self.backfills

    def passed_over(self, workloads: Sequence[PendingWorkload]) -> bool:
        """Is every one of ``workloads`` like one that failed?"""
        failed, (now, start, short, backfills) = self.failed, self.context()
        for workload in workloads:  # noqa: SIM110 - a loop, not all() over a generator: the hot path
            if signature(workload, now, start, short, backfills) not in failed:
                return False
        return True

    def leading_hits(self, items: deque[PendingWorkload]) -> tuple[int, tuple | None]:
        """Drop the hits at the front of ``items`` and take the first miss: (how many were taken,
        (the miss, its signature)), or (the hits, None) when all were hits (``items`` emptied)."""
        failed, (now, start, short, backfills) = self.failed, self.context()
        hits = 0
        for workload in items:
            found = signature(workload, now, start, short, backfills)
            if found not in failed:
                break
            hits += 1
        else:
            items.clear()
            return hits, None
        for _ in range(hits):
            items.popleft()
        return hits + 1, (items.popleft(), found)


def still_pending(
    groups: dict[tuple[AllocationPath, str], list[PendingWorkload]],
    started_groups: dict[tuple[AllocationPath, str], list[PendingWorkload]],
    requeued: Iterable[PendingWorkload],
    started: set[int],
) -> dict[tuple[AllocationPath, str], list[PendingWorkload]]:
    """What a settling walk walks: the snapshot's ``groups`` (none empty) less what started from
    each (``started_groups``), plus the ``requeued`` victims that did not restart, each group in
    (submitted_at, id) order. The snapshot's own lists are never changed."""
    groups = {key: queue for key, queue in groups.items() if queue}
    for key, started_here in started_groups.items():
        queue = groups.get(key)
        if queue is None:  # only requeued victims started from it
            continue
        kept = _without(queue, started_here)
        if kept:
            groups[key] = kept
        else:
            del groups[key]
    for workload in requeued:
        if workload.id not in started:
            key = (workload.allocation, workload.user)
            queue = groups[key] = [*groups.get(key, ()), workload]  # a copy: never the snapshot's
            queue.sort(key=SUBMIT_ORDER)
    return groups


def _without(queue: list[PendingWorkload], started: list[PendingWorkload]) -> list[PendingWorkload]:
    """A copy of ``queue`` (in (submitted_at, id) order) less ``started``, found by bisection so the
    rest of the queue is not read; started workloads that are not in it (requeued victims) are skipped."""
    kept = list(queue)
    for workload in started:
        at = bisect_left(kept, SUBMIT_ORDER(workload), key=SUBMIT_ORDER)
        if at < len(kept) and kept[at] is workload:
            del kept[at]
    return kept
