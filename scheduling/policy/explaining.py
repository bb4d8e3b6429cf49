"""Phases 4 and 5 of a pass: the reservation for the best-ranked blocked workload (DESIGN 5 step 6)
and the pending reasons (DESIGN 6), with positions and estimated starts. Mixed into the pass."""

from __future__ import annotations

from operator import attrgetter, itemgetter

from scheduling.policy import reasons
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.reservation import INFINITE, ReleaseProfile
from scheduling.policy.types import PendingReason, PendingWorkload, Reservation

_WORKLOAD, _KEY = itemgetter(0), itemgetter(1)
_ID = attrgetter("id")
_SHAPE = attrgetter("gpus", "gpus_per_node", "gpu_type")


class Explaining:
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
    def _explain(self) -> tuple:
        """One reason per pending workload, in the final walk's order (held work last)."""
        self.first_seen: dict[str, int] = {}
        self.resolved: dict[int, reasons.Outcome] = {}  # by id(key): equal keys are one object
        self.capacity_by_shape: dict[str, dict[Shape, reasons.Outcome]] = {}  # untried work's
        explained: list[PendingReason] = []
        start = 0
        for at, (workload, key) in enumerate(self.blocked):
            if workload is None:  # an untried tail: key holds its (allocation, queue) groups
                self._explain_group(None, self.blocked[start:at], explained)
                for allocation, items in key:
                    self._explain_group(allocation, items, explained)
                start = at + 1
        self._explain_group(None, self.blocked[start:], explained)
        held = [reasons.held(workload) for workload in self.held]
        explained.extend(reasons.make_reasons(list(map(_ID, self.held)), held, len(explained) + 1))
        return tuple(explained)

    def _explain_group(self, allocation: str | None, items, explained: list) -> None:
        """Append reasons for ``items``: (workload, key) pairs, or, with an ``allocation``, untried
        workloads whose key comes from their shape and standing. Requeued victims that did not
        restart get none (they were not pending in the snapshot)."""
        if allocation is None:
            workloads, keys = list(map(_WORKLOAD, items)), list(map(_KEY, items))
        else:
            workloads, keys = list(items), None
        ids = list(map(_ID, workloads))
        if self.requeued and not self.requeued.isdisjoint(ids):
            kept = [at for at, workload_id in enumerate(ids) if workload_id not in self.requeued]
            ids, workloads = [ids[at] for at in kept], [workloads[at] for at in kept]
            if keys is not None:
                keys = [keys[at] for at in kept]
        before = len(explained)
        if keys is not None:
            outcomes = self._outcomes(list(map(id, keys)), lambda _, at: keys[at], before)
        elif self.fairshare and allocation not in self.tree.funded:
            outcomes = [self._resolved(("unfunded", allocation), before + 1)] * len(ids)
        else:
            capacity = lambda shape, _: ("capacity", shape, allocation)  # noqa: E731
            known = self.capacity_by_shape.setdefault(allocation, {})  # one per shape and allocation
            outcomes = self._outcomes(list(map(_SHAPE, workloads)), capacity, before, known)
        explained.extend(reasons.make_reasons(ids, outcomes, before + 1))

    def _outcomes(self, tags: list, key_of, before: int, known: dict | None = None) -> list[reasons.Outcome]:
        """The outcome of each tag (a key's id, or an untried workload's shape), the first of them
        at position ``before + 1``. Each distinct tag is resolved once, at its first appearance and
        in order of first appearance: a capacity reason counts the workloads ahead from there.
        ``known``: tag -> outcome resolved by an earlier call (its key's, which never changes), kept
        up to date here."""
        if known:  # most of an allocation's later queues hold only shapes resolved before: one lookup each
            outcomes = list(map(known.get, tags))
            if None not in outcomes:
                return outcomes
        by_tag, at, find = {} if known is None else known, -1, tags.index
        for tag in dict.fromkeys(tags):  # distinct tags, in order of first appearance
            at = find(tag, at + 1)  # its first index: every tag between was seen before it
            if tag not in by_tag:
                by_tag[tag] = self._resolved(key_of(tag, at), before + at + 1)
        return list(map(by_tag.__getitem__, tags))

    def _resolved(self, key: tuple, position: int) -> reasons.Outcome:
        """``key``'s outcome, resolved once per pass (equal keys are one object, see ``_wait``)."""
        key = self.keys.setdefault(key, key)
        outcome = self.resolved.get(id(key))
        if outcome is None:
            outcome = self.resolved[id(key)] = self._resolve(key, position)
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
        free = {**self.index.free, **self.reserved.free}
        if self.profile is None:
            nodes = [node for node in self.snapshot.nodes if node.healthy]
            preemptive = self.fairshare and self.config.preemption
            self.profile = ReleaseProfile(nodes, free, self.occupants, self.now, preemptive)
        elif self.touched:
            self.profile.refresh(self.touched, free, self.occupants)
        self.touched.clear()
        return self.profile

    def _node_size(self, shape: Shape) -> int:
        """The largest node size of the shape's GPU type (any type for None)."""
        return max(
            (size for kind, by_size in self.sizes.items() if shape[2] in (None, kind) for size in by_size),
            default=0,
        )
