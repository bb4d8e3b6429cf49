"""Phases 4 and 5 of a pass: the reservation for the best-ranked blocked workload (DESIGN 5 step 6)
and the pending reasons (DESIGN 6), with positions and estimated starts. Mixed into the pass."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

from scheduling.policy import reasons
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.reservation import INFINITE, ReleaseProfile
from scheduling.policy.types import PendingWorkload, Reservation

if TYPE_CHECKING:
    from scheduling.policy.pass_state import PassState as _PassBase
else:
    _PassBase = object  # the pass's state is declared for the type checker only (pass_state.py)

_WORKLOAD, _KEY = itemgetter(0), itemgetter(1)
_ID = attrgetter("id")
_SHAPE = attrgetter("gpus", "gpus_per_node", "gpu_type")


class Explaining(_PassBase):
    """The reserve-and-explain half of ``planner._Pass``; it reads and updates the pass's state."""

    # -- reserve -------------------------------------------------------------------------------
    def _reserve(self, workload: PendingWorkload, shape: Shape) -> None:
        start_at, names = self._release_profile().earliest(shape)
        if not names:
            return
        self.reservation = Reservation(workload.id, names, start_at)
        self.generation += 1
        self.relief += 1
        self.reserved_workload = workload
        for name in names:
            spec = self.index.spec[name]
            self.reserved.add_node(spec, self.index.remove_node(name))

    def _release_reservation(self) -> None:
        """Give the reserved nodes back to the main index (before a settling walk reserves anew)."""
        for name in sorted(self.reserved.spec):
            spec = self.reserved.spec[name]
            self.index.add_node(spec, self.reserved.remove_node(name))
        self.reservation = None
        self.reserved_workload = None

    def _blocked_key(self, workload: PendingWorkload, shape: Shape, backfill: bool, protected) -> tuple:
        fallback = self._plain_blocked_key(workload, shape, backfill)
        if protected is None:
            return fallback
        may_use_reserved = backfill or workload is self.reserved_workload
        return (*protected, may_use_reserved, fallback)

    def _plain_blocked_key(self, workload: PendingWorkload, shape: Shape, backfill: bool) -> tuple:
        if workload is self.reserved_workload:
            return ("reserved_self", shape, workload.allocation)
        if self.reservation is not None and not backfill and shape not in self.no_fit_reserved:
            return ("held_for", self.reservation.workload_id)
        if self.fairshare and not self._funded(workload):
            return ("unfunded", workload.allocation)
        return ("capacity", shape, workload.allocation)

    # -- explain -------------------------------------------------------------------------------
    def _explain(self) -> reasons.Reasons:
        """One reason per pending workload, in the final walk's order (held work last).

        Built as columns (see reasons.py): per run of the order, the workloads and the outcome
        of each one's key (or, in an untried tail, of its shape), each distinct key resolved at
        its first appearance, in order, so a "queued" reason counts the work ahead of its
        allocation's first queued workload."""
        self._start_explaining()
        explained: list = []
        outcomes: list[reasons.Outcome] = []
        start = 0
        blocked = self.blocked
        for at, (workload, key) in enumerate(blocked):
            if workload is None:  # an untried tail: key holds its (allocation, queue) groups
                self._explain_walked(blocked[start:at], explained, outcomes)
                for allocation, items in key:
                    self._explain_untried(allocation, items, explained, outcomes)
                start = at + 1
        self._explain_walked(blocked[start:] if start else blocked, explained, outcomes)
        explained.extend(self.held)
        outcomes.extend(map(reasons.held, self.held))
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
                resolved[key] = self._resolved(key, base + at + 1)
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
        if self.fairshare and allocation not in self.tree.funded:
            outcomes.extend(repeat(self._resolved(("unfunded", allocation), base + 1), len(items)))
            return
        known = self.capacity_by_shape.setdefault(allocation, {})  # one per shape and allocation
        shapes = list(map(_SHAPE, items))
        at, find = -1, shapes.index
        for shape in dict.fromkeys(shapes):  # distinct shapes, in order of first appearance
            at = find(shape, at + 1)
            if shape not in known:
                known[shape] = self._resolved(("capacity", shape, allocation), base + at + 1)
        outcomes.extend(map(known.__getitem__, shapes))

    def _start_explaining(self) -> None:
        self.first_seen: dict[str, int] = {}
        self.resolved: dict[tuple, reasons.Outcome] = {}  # outcome key -> its outcome, once resolved
        self.capacity_by_shape: dict[str, dict[Shape, reasons.Outcome]] = {}  # untried work's
        # (allocation, user) queues that may hold a requeued victim (ids are unique across running
        # and pending work, so no other queue holds one): only these are filtered
        self.requeued_groups = {
            (workload.allocation, workload.user) for workload in self.requeued_work.values()
        }

    def _segments(self) -> Iterator[tuple[str | None, Sequence[PendingWorkload], list | None]]:
        """The final walk's order in runs: (None, workloads, their keys) for walked work, and
        (allocation, workloads, None) for each queue of an untried tail, whose keys come from
        their shape and standing (the queue itself, not a copy). Requeued victims that did not
        restart are left out (they were not pending in the snapshot)."""
        start = 0
        blocked = self.blocked
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

    def _explain_only(self, wanted: frozenset[int]) -> reasons.Reasons:
        """The reasons ``_explain`` gives the ``wanted`` workloads, and only those: positions count
        the segments ahead, and only the keys of the wanted workloads are resolved. The one thing a
        reason takes from the order is the work ahead of an allocation's first "queued" reason
        (``first_seen``): that is found by scanning for the first workload resolving like it."""
        self._start_explaining()
        segments = list(self._segments())
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
        for offset, workload in enumerate(self.held):
            if workload.id in wanted:
                explained.append(workload)
                outcomes.append(reasons.held(workload))
                positions.append(before + offset + 1)
        return reasons.Reasons(explained, outcomes, positions)

    def _replay_protected(self, segments: list, last: int) -> None:
        """Judge protection for every walked key up to position ``last`` in the order ``_explain``
        does: a judgement caches victim pools (per standing, not per shape) and charges the tree
        and back, so an earlier one can change a later one; the same order gives the same result."""
        before = 0
        for _, workloads, keys in segments:
            if before >= last:
                return
            if keys is not None:
                walked = keys[: last - before]
                for key in dict.fromkeys(walked):  # distinct keys, in order of first appearance
                    if key[0] == "check_protected":
                        self._protected_until(key[1:6])
            before += len(workloads)

    def _untried_key(self, allocation: str, workload: PendingWorkload) -> tuple:
        """The key ``_explain_untried`` resolves an untried workload of ``allocation`` by."""
        if self.fairshare and allocation not in self.tree.funded:
            return ("unfunded", allocation)
        return ("capacity", _SHAPE(workload), allocation)

    def _queued_allocation(self, key: tuple) -> str | None:
        """The allocation whose "queued" reason ``key`` resolves to (see ``_capacity_outcome``), or None."""
        if key[0] == "check_protected":
            if self._protected_until(key[1:6]) is not None:
                return None
            key = key[6]
        if key[0] in ("capacity", "reserved_self") and self._fit_at_start(key[1]):
            return key[2]
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

    def _resolved(self, key: tuple, position: int) -> reasons.Outcome:
        """``key``'s outcome, resolved once per pass (equal keys are one object, see ``_wait``)."""
        outcome = self.resolved.get(key)
        if outcome is None:
            outcome = self.resolved[key] = self._resolve(key, position)
        return outcome

    def _resolve(self, key: tuple, position: int) -> reasons.Outcome:
        if key[0] == "check_protected":
            until = self._protected_until(key[1:6])
            return (
                self._resolve(key[6], position)
                if until is None
                else self._resolve(("protected", until), position)
            )
        if key[0] in ("capacity", "reserved_self"):
            return self._capacity_outcome(key, position)
        outcome = self.outcomes.get(key)
        if outcome is None:
            outcome = self.outcomes[key] = self._outcome(key)
        return outcome

    def _capacity_outcome(self, key: tuple, position: int) -> reasons.Outcome:
        """It could have run on what was free when the pass began: work ranked ahead took it."""
        _, shape, allocation = key
        if self._fit_at_start(shape):
            ahead = self.first_seen.setdefault(allocation, position - 1)
            group = ("queued", allocation, ahead)
            outcome = self.outcomes.get(group)
            if outcome is None:
                if self.fairshare:
                    ratio = self.tree.base_ratio.get(allocation, INFINITE)
                    outcome = reasons.fair_share_queued(ahead, allocation, ratio)
                else:
                    outcome = reasons.queued_in_order(ahead, self.config.ordering)
                self.outcomes[group] = outcome
            return outcome
        outcome = self.outcomes.get(key[:2])
        if outcome is None:
            outcome = self.outcomes[key[:2]] = self._outcome(key[:2])
        return outcome

    def _protected_until(self, attempt: tuple) -> float | None:
        """When a failed preemption would succeed if protected work were fair game: until when that
        work is protected (None: protection is not what stands in the way). Judged on the pass's
        final state, once per (shape, allocation, user, priority, may it use reserved nodes)."""
        memo = self.outcomes.setdefault(("protected_until",), {})
        if attempt not in memo:
            shape, allocation, user, priority, may_use_reserved = attempt
            stand_in = PendingWorkload(
                -1, allocation, user, shape[0], 0.0, shape[1], shape[2], priority=priority
            )
            memo[attempt] = None
            for index in (self.index, self.reserved) if may_use_reserved else (self.index,):
                pool = self._victim_pool(stand_in, index, include_protected=False)
                found = self._blocked_by_protection(stand_in, shape, pool, index)
                if found is not None:
                    memo[attempt] = found[1]
                    break
        return memo[attempt]

    def _fit_at_start(self, shape: Shape) -> bool:
        """Would ``shape`` have fitted on the GPUs free when the pass began? (Then work ahead took them.)"""
        memo = self.fit_at_start
        if shape not in memo:
            memo[shape] = self.start_index.place(shape) is not None
        return memo[shape]

    def _outcome(self, key: tuple) -> reasons.Outcome:
        kind = key[0]
        if kind == "none":
            return reasons.no_matching_nodes(key[1], self._node_size(key[1]))
        if kind == "limit":
            return reasons.over_limit(key[1], self.tree.limit[key[1]])
        if kind == "protected":
            return reasons.protected_work(key[1])
        if kind == "held_for":
            assert (
                self.reserved_workload is not None and self.reservation is not None
            )  # keyed so when reserved
            return reasons.reserved_for(self.reserved_workload, self.reservation.start_at)
        if kind == "unfunded":
            return reasons.unfunded(key[1])
        shape = key[1]
        estimate = self._estimate(shape)
        if kind == "reserved_self" and self.reservation is not None:
            estimate = self.reservation.start_at or INFINITE
        if estimate <= self.now:  # free "now" only by preempting what it may not preempt: unknown
            estimate = INFINITE
        free = self.index.free_gpus(shape[2]) + self.reserved.free_gpus(shape[2])
        if free >= shape[0]:
            nodes = sum(
                1
                for index in (self.index, self.reserved)
                for name, count in index.free.items()
                if count and self._matches(index, name, shape)
            )
            return reasons.fragmented(shape, self._node_size(shape), free, nodes, estimate)
        return reasons.waiting_for_gpus(shape, self._node_size(shape), estimate)

    def _matches(self, index: FreeIndex, name: str, shape: Shape) -> bool:
        return shape[2] is None or index.spec[name].gpu_type == shape[2]

    def _estimate(self, shape: Shape) -> float:
        return self._release_profile().earliest(shape)[0]

    def _release_profile(self) -> ReleaseProfile:
        """When GPUs free up, from what runs now: built once, then only the nodes that work started
        on or left since (``touched``) are recomputed."""
        if self.profile is None:
            free = {**self.index.free, **self.reserved.free}
            nodes = self.snapshot.nodes
            preemptive = self.fairshare and self.config.preemption
            self.profile = ReleaseProfile(
                (node for node in nodes if node.healthy),  # read only if ``nodes`` is not carried
                free,
                self.occupants,
                self.now,
                preemptive,
                self.release_keys,
                self.touched,
                source=nodes,
                session=self.session,
            )
        elif self.touched:
            self.profile.refresh(self.touched, {**self.index.free, **self.reserved.free}, self.occupants)
        self.touched.clear()
        return self.profile

    def _node_size(self, shape: Shape) -> int:
        """The largest node size of the shape's GPU type (any type for None)."""
        return max(
            (size for kind, by_size in self.sizes.items() if shape[2] in (None, kind) for size in by_size),
            default=0,
        )
