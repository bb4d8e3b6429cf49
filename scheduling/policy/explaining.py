"""Phase 4 of a pass: the pending reasons (DESIGN 6), with positions and estimated starts. The
admit phase records why each workload waits as an outcome key (``blocked_key``, outcome_keys.py);
the explain phase resolves each distinct key once, on the pass's final state."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter

from scheduling.policy import reasons
from scheduling.policy.capacity import Capacity
from scheduling.policy.outcome_keys import Attempt, CheckProtected, NoCapacity, OutcomeKey, Settled
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preempting import Preemptor
from scheduling.policy.reservation import INFINITE
from scheduling.policy.reserving import Reserver
from scheduling.policy.standing import Standing
from scheduling.policy.types import PendingWorkload, PolicyConfig, WorkloadId

_WORKLOAD, _KEY = itemgetter(0), itemgetter(1)
_ID = attrgetter("id")
_SHAPE = attrgetter("gpus", "gpus_per_node", "gpu_type")


class Explainer:
    """Why each pending workload waits: the keys the walk records, and their reasons."""

    def __init__(
        self,
        capacity: Capacity,
        standing: Standing,
        reserver: Reserver,
        preemptor: Preemptor,
        now: float,
        config: PolicyConfig,
    ) -> None:
        self.capacity, self.standing, self.reserver, self.preemptor = capacity, standing, reserver, preemptor
        self.now, self.config = now, config
        self.outcomes: dict[tuple, reasons.Outcome] = {}  # ("queued", allocation, ahead) -> outcome
        self.by_shape: dict[tuple[bool, Shape], reasons.Outcome] = {}  # (reserved, shape) ->
        self.protected: dict[tuple[Attempt, bool], float | None] = {}  # see ``protected_until``
        self.saving: dict[tuple[Attempt, bool], float | None] = {}  # see ``checkpoint_at``
        self.first_seen: dict[str, int] = {}
        self.resolved: dict[OutcomeKey, reasons.Outcome] = {}  # key -> its outcome, once resolved
        self.capacity_by_shape: dict[str, dict[Shape, reasons.Outcome]] = {}  # untried work's
        self.requeued: set[WorkloadId] = set()
        self.requeued_groups: set[tuple[str, str]] = set()

    def blocked_key(
        self, workload: PendingWorkload, shape: Shape, backfill: bool, failed: Attempt | None
    ) -> OutcomeKey:
        """Why ``workload`` (of ``shape``; may it ``backfill`` reserved nodes?) did not start
        after its placement, preemption (``failed``: the attempt, if one was made) and
        reservation were tried."""
        fallback = self._plain_blocked_key(workload, shape, backfill)
        if failed is None:
            return fallback
        may_use_reserved = backfill or workload is self.reserver.workload
        return CheckProtected(failed, may_use_reserved, fallback)

    def _plain_blocked_key(
        self, workload: PendingWorkload, shape: Shape, backfill: bool
    ) -> Settled | NoCapacity:
        reserver = self.reserver
        if workload is reserver.workload:
            return NoCapacity(shape, workload.allocation, reserved=True)
        if reserver.reservation is not None and not backfill and shape not in self.capacity.no_fit_reserved:
            return Settled(reasons.reserved_for, (reserver.workload, reserver.reservation.start_at))
        if self.standing.fairshare and not self.standing.funded(workload):
            return _unfunded(workload.allocation)
        return NoCapacity(shape, workload.allocation)

    # -- explain -------------------------------------------------------------------------------
    def explain(
        self, blocked: list, held: list[PendingWorkload], requeued: dict[WorkloadId, PendingWorkload]
    ) -> reasons.Reasons:
        """One reason per pending workload, in the final walk's order (``blocked``, from the walk:
        (workload, its key), or (None, an untried tail's groups)), ``held`` work last; the
        ``requeued`` victims that did not restart get none (they were not pending in the snapshot).

        Built as columns (see reasons.py): per run of the order, the workloads and the outcome
        of each one's key (or, in an untried tail, of its shape), each distinct key resolved at
        its first appearance, in order, so a "queued" reason counts the work ahead of its
        allocation's first queued workload."""
        self._start_explaining(requeued)
        explained: list = []
        outcomes: list[reasons.Outcome] = []
        start = 0
        for at, (workload, key) in enumerate(blocked):
            if workload is None:  # an untried tail: key holds its (allocation, queue) groups
                self._explain_walked(blocked[start:at], explained, outcomes)
                for allocation, items in key:
                    self._explain_untried(allocation, items, explained, outcomes)
                start = at + 1
        self._explain_walked(blocked[start:] if start else blocked, explained, outcomes)
        explained.extend(held)
        outcomes.extend(map(reasons.held, held))
        return reasons.Reasons(explained, outcomes)

    def _explain_walked(self, items: list, explained: list, outcomes: list) -> None:
        """Walked (workload, key) pairs; requeued victims get none."""
        if self.requeued:
            requeued = self.requeued
            items = [item for item in items if item[0].id not in requeued]
        if not items:
            return
        keys = list(map(_KEY, items))
        resolved, base = self.resolved, len(explained)
        at, find = -1, keys.index
        for key in dict.fromkeys(keys):  # distinct keys, in order of first appearance
            at = find(key, at + 1)
            if key not in resolved:
                resolved[key] = self._resolve(key, base + at + 1)
        explained.extend(map(_WORKLOAD, items))
        outcomes.extend(map(resolved.__getitem__, keys))

    def _explain_untried(self, allocation: str, items, explained: list, outcomes: list) -> None:
        """An untried queue of ``allocation``: the outcome of each workload's shape in its
        allocation (or of the allocation being unfunded)."""
        if items and (allocation, items[0].user) in self.requeued_groups:  # a queue holds one user's work
            items = [workload for workload in items if workload.id not in self.requeued]
        if not items:
            return
        base = len(explained)
        explained.extend(items)
        if self.standing.fairshare and allocation not in self.standing.tree.funded:
            outcomes.extend(repeat(self._resolved(_unfunded(allocation), base + 1), len(items)))
            return
        known = self.capacity_by_shape.setdefault(allocation, {})  # one per shape and allocation
        shapes = list(map(_SHAPE, items))
        at, find = -1, shapes.index
        for shape in dict.fromkeys(shapes):  # distinct shapes, in order of first appearance
            at = find(shape, at + 1)
            if shape not in known:
                known[shape] = self._resolved(NoCapacity(shape, allocation), base + at + 1)
        outcomes.extend(map(known.__getitem__, shapes))

    def _start_explaining(self, requeued: dict[WorkloadId, PendingWorkload]) -> None:
        self.requeued = set(requeued)
        # (allocation, user) queues that may hold a requeued victim (ids are unique across running
        # and pending work, so no other queue holds one): only these are filtered
        self.requeued_groups = {(workload.allocation, workload.user) for workload in requeued.values()}

    def _segments(self, blocked: list) -> Iterator[tuple[str | None, Sequence[PendingWorkload], list | None]]:
        """The final walk's order in runs: (None, workloads, their keys) for walked work, and
        (allocation, workloads, None) for each queue of an untried tail, whose keys come from
        their shape and standing (the queue itself, not a copy). Requeued victims that did not
        restart are left out (they were not pending in the snapshot)."""
        start = 0
        for at, (workload, key) in enumerate(blocked):
            if workload is None:  # an untried tail: key holds its (allocation, queue) groups
                yield self._segment(None, blocked[start:at])
                for allocation, items in key:
                    yield self._segment(allocation, items)
                start = at + 1
        yield self._segment(None, blocked[start:])

    def _segment(
        self, allocation: str | None, items
    ) -> tuple[str | None, Sequence[PendingWorkload], list | None]:
        requeued = self.requeued
        if allocation is None:
            if requeued:
                items = [item for item in items if item[0].id not in requeued]
            return None, list(map(_WORKLOAD, items)), list(map(_KEY, items))
        if items and (allocation, items[0].user) in self.requeued_groups:  # one user's queue
            items = [workload for workload in items if workload.id not in requeued]
        return allocation, items, None

    def explain_only(
        self,
        wanted: frozenset[int],
        blocked: list,
        held: list[PendingWorkload],
        requeued: dict[WorkloadId, PendingWorkload],
    ) -> reasons.Reasons:
        """The reasons ``explain`` gives the ``wanted`` workloads, and only those: positions count
        the segments ahead, and only the keys of the wanted workloads are resolved. The one thing a
        reason takes from the order is the work ahead of an allocation's first "queued" reason
        (``first_seen``): that is found by scanning for the first workload resolving like it."""
        self._start_explaining(requeued)
        segments = list(self._segments(blocked))
        found: list[tuple[int, int, int]] = []  # (position, segment, offset), in position order
        before = 0
        for at, (_, workloads, _) in enumerate(segments):
            if not wanted.isdisjoint(map(_ID, workloads)):
                found.extend(
                    (before + offset + 1, at, offset)
                    for offset, workload in enumerate(workloads)
                    if workload.id in wanted
                )
            before += len(workloads)
        if found:
            self._replay_protected(segments, found[-1][0])
        explained: list = []
        outcomes: list[reasons.Outcome] = []
        positions: list[int] = []
        for position, at, offset in found:
            allocation, workloads, keys = segments[at]
            workload = workloads[offset]
            key = keys[offset] if keys is not None else self._untried_key(allocation, workload)  # type: ignore[arg-type]  # no keys: an allocation's segment
            queued_in = self._queued_allocation(key)
            if queued_in is not None and queued_in not in self.first_seen:
                self.first_seen[queued_in] = self._first_queued(queued_in, segments) - 1
            explained.append(workload)
            outcomes.append(self._resolved(key, position))
            positions.append(position)
        for offset, workload in enumerate(held):
            if workload.id in wanted:
                explained.append(workload)
                outcomes.append(reasons.held(workload))
                positions.append(before + offset + 1)
        return reasons.Reasons(explained, outcomes, positions)

    def _replay_protected(self, segments: list, last: int) -> None:
        """Judge protection and checkpoints (``_standing_in_the_way``) for every walked key up to
        position ``last`` in the order ``explain`` does: a judgement caches victim pools (per
        standing, not per shape) and charges the tree and back, so an earlier one can change a
        later one; the same order gives the same result."""
        before = 0
        for _, workloads, keys in segments:
            if before >= last:
                return
            if keys is not None:
                walked = keys[: last - before]
                for key in dict.fromkeys(walked):  # distinct keys, in order of first appearance
                    if isinstance(key, CheckProtected):
                        self._standing_in_the_way(key)
            before += len(workloads)

    def _untried_key(self, allocation: str, workload: PendingWorkload) -> Settled | NoCapacity:
        """The key ``_explain_untried`` resolves an untried workload of ``allocation`` by."""
        if self.standing.fairshare and allocation not in self.standing.tree.funded:
            return _unfunded(allocation)
        return NoCapacity(_SHAPE(workload), allocation)

    def _queued_allocation(self, key: OutcomeKey) -> str | None:
        """The allocation whose "queued" reason ``key`` resolves to (see ``_capacity_outcome``), or None."""
        if isinstance(key, CheckProtected):
            if self._standing_in_the_way(key) is not None:
                return None
            key = key.fallback
        if isinstance(key, NoCapacity) and self.capacity.fit_at_start(key.shape):
            return key.allocation
        return None

    def _first_queued(self, allocation: str, segments: list) -> int:
        """The position of the first workload whose key resolves to ``allocation``'s "queued" reason."""
        before = 0
        for segment_allocation, workloads, keys in segments:
            if keys is not None:
                at, find = -1, keys.index
                for key in dict.fromkeys(keys):  # distinct keys, in order of first appearance
                    at = find(key, at + 1)
                    if self._queued_allocation(key) == allocation:
                        return before + at + 1
            elif segment_allocation == allocation:
                for at, workload in enumerate(workloads):
                    if self._queued_allocation(self._untried_key(allocation, workload)) == allocation:
                        return before + at + 1
            before += len(workloads)
        raise AssertionError(f"no queued work of {allocation}")  # the wanted workload is one

    def _resolved(self, key: OutcomeKey, position: int) -> reasons.Outcome:
        """``key``'s outcome, resolved once per pass (equal keys are one object, see ``_wait``)."""
        outcome = self.resolved.get(key)
        if outcome is None:
            outcome = self.resolved[key] = self._resolve(key, position)
        return outcome

    def _resolve(self, key: OutcomeKey, position: int) -> reasons.Outcome:
        if isinstance(key, CheckProtected):
            settled = self._standing_in_the_way(key)
            if settled is not None:
                return self._resolved(settled, position)
            return self._resolve(key.fallback, position)
        if isinstance(key, NoCapacity):
            return self._capacity_outcome(key, position)
        assert isinstance(key, Settled), key
        return key.reason(*key.args)

    def _capacity_outcome(self, key: NoCapacity, position: int) -> reasons.Outcome:
        """It could have run on what was free when the pass began: work ranked ahead took it."""
        shape, allocation = key.shape, key.allocation
        if self.capacity.fit_at_start(shape):
            ahead = self.first_seen.setdefault(allocation, position - 1)
            group = ("queued", allocation, ahead)
            outcome = self.outcomes.get(group)
            if outcome is None:
                if self.standing.fairshare:
                    ratio = self.standing.tree.base_ratio.get(allocation, INFINITE)
                    outcome = reasons.fair_share_queued(ahead, allocation, ratio)
                else:
                    outcome = reasons.queued_in_order(ahead, self.config.ordering)
                self.outcomes[group] = outcome
            return outcome
        outcome = self.by_shape.get((key.reserved, shape))
        if outcome is None:
            outcome = self.by_shape[(key.reserved, shape)] = self._shape_outcome(key)
        return outcome

    def _standing_in_the_way(self, key: CheckProtected) -> Settled | None:
        """What a failed preemption waits for: protected work until its protection ends, or work
        that would lose what it did since its last checkpoint until it saves; None: neither
        (``key.fallback`` says why it waits)."""
        until = self.protected_until(key.attempt, key.may_use_reserved)
        if until is not None:
            return Settled(reasons.protected_work, (until,))
        saves = self.checkpoint_at(key.attempt, key.may_use_reserved)
        if saves is not None:
            return Settled(reasons.waiting_for_checkpoint, (saves,))
        return None

    def checkpoint_at(self, attempt: Attempt, may_use_reserved: bool) -> float | None:
        """When a failed preemption would succeed because its victims have saved their progress
        (``Preemptor.blocked_by_loss``); None: the work they would lose is not what stands in the
        way."""
        return self._judged(self.saving, attempt, may_use_reserved, self.preemptor.blocked_by_loss)

    def protected_until(self, attempt: Attempt, may_use_reserved: bool) -> float | None:
        """When a failed preemption would succeed if protected work were fair game: until when that
        work is protected (``Preemptor.blocked_by_protection``; None: protection is not what
        stands in the way)."""
        return self._judged(self.protected, attempt, may_use_reserved, self.preemptor.blocked_by_protection)

    def _judged(
        self,
        memo: dict[tuple[Attempt, bool], float | None],
        attempt: Attempt,
        may_use_reserved: bool,
        blocked: Callable[[PendingWorkload, Shape, FreeIndex], float | None],
    ) -> float | None:
        """``blocked`` asked for a failed ``attempt`` (a stand-in of its key) on the unreserved
        nodes, then on the reserved ones if it may use them: the first answer that is not None.
        Judged on the pass's final state, once per attempt and ``may_use_reserved`` (``memo``)."""
        if (attempt, may_use_reserved) not in memo:
            shape, allocation, user, priority = attempt
            stand_in = PendingWorkload(
                -1, allocation, user, shape[0], 0.0, shape[1], shape[2], priority=priority
            )
            memo[(attempt, may_use_reserved)] = None
            capacity = self.capacity
            for index in (capacity.index, capacity.reserved) if may_use_reserved else (capacity.index,):
                found = blocked(stand_in, shape, index)
                if found is not None:
                    memo[(attempt, may_use_reserved)] = found
                    break
        return memo[(attempt, may_use_reserved)]

    def _shape_outcome(self, key: NoCapacity) -> reasons.Outcome:
        """Waiting for GPUs of ``key``'s shape: enough are free but scattered (fragmented), or
        not enough are, with the estimate of when they will be."""
        shape, capacity = key.shape, self.capacity
        estimate = self.reserver.estimate(shape)[0]
        reservation = self.reserver.reservation
        if key.reserved and reservation is not None:
            estimate = reservation.start_at or INFINITE
        if estimate <= self.now:  # free "now" only by preempting what it may not preempt: unknown
            estimate = INFINITE
        free = capacity.free_gpus(shape[2])
        if free >= shape[0]:
            nodes = capacity.nodes_with_free_gpus(shape)
            return reasons.fragmented(shape, capacity.node_size(shape), free, nodes, estimate)
        return reasons.waiting_for_gpus(shape, capacity.node_size(shape), estimate)


def _unfunded(allocation: str) -> Settled:
    return Settled(reasons.unfunded, (allocation,))
