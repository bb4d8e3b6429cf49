"""Phase 3 of a pass, preemption (DESIGN 5 step 5): who a funded workload that does not fit may
preempt, and what happens to the victims. In what order they go is victims.py's."""

from __future__ import annotations

from itertools import chain
from typing import NamedTuple, cast

from scheduling.policy.node_keys import KeptNeeds
from scheduling.policy.outcome_keys import Attempt
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preemption import VictimPool, choose_victims
from scheduling.policy.rules import is_protected, is_short, next_checkpoint, work_lost, worth_losing
from scheduling.policy.types import PendingWorkload, Placement, Preemption, RunningWorkload
from scheduling.policy.victims import VictimOrders, _Order


class Preempted(NamedTuple):
    """A preemption that frees a placement: the victims are evicted, the preemptor may start."""

    placement: Placement
    on: FreeIndex  # the index the placement is on
    victims: list[RunningWorkload]


class Preemptor:
    """The pass's preemptions: attempts, evictions, and what an eviction changes."""

    def __init__(self, victims: VictimOrders) -> None:
        self.victims = victims  # whose work each preemptor may take: its parts are this one's
        self.capacity, self.standing, self.changes = victims.capacity, victims.standing, victims.changes
        self.now, self.config = victims.now, victims.config
        self.preemptions: list[Preemption] = []
        self.no_preempt: dict[tuple, Attempt] = {}  # attempts that found no victims, until relief
        self.node_needs: dict[str, frozenset | None] | None = None  # see ``needs_by_node``
        self.evicted_nodes: set[str] = set()  # see ``_kept_node_needs``
        self.started_nodes: set[str] = set()  # ... and ``started``
        self.preemptible: tuple | None = None  # (relief, what ``_preemptible`` found then)

    # -- preempt -------------------------------------------------------------------------------
    def may_preempt(self, workload: PendingWorkload) -> bool:
        """Who may preempt: funded work under fair share, any work under priority (a strictly
        higher class, see ``VictimOrders.allowed_allocations``), nobody under FIFO or with
        preemption off."""
        if not self.config.preemption or self.config.ordering == "fifo":
            return False
        return self.config.ordering == "priority" or self.standing.funded(workload)

    def preempt(self, workload: PendingWorkload, shape: Shape, backfill: bool) -> Preempted | Attempt:
        """Evict the fewest victims that free a placement for ``workload`` on unreserved nodes, or
        also on reserved ones for work that may backfill them (``Preempted``: it may start); else
        the failed ``Attempt`` (whether protected work stands in the way is judged when explaining)."""
        # (short work may lose more: ``rules.loss_allowance``)
        memo_key = (shape, workload.allocation, workload.priority, backfill, is_short(workload, self.config))
        failed = self.no_preempt.get(memo_key)
        if failed is not None:
            return failed
        capacity = self.capacity
        indexes = (
            (capacity.index, capacity.reserved) if backfill and capacity.reserved.spec else (capacity.index,)
        )
        order = self.victims.victim_order(workload, False)  # (when the original decided it: see there)
        for index in indexes:
            pool = order.pools.get(index)
            if pool is None:  # a pool already made rejects as cheaply as the bound
                if self._surely_hopeless(order, shape, index) or self._unordered_pool(order, index).hopeless(
                    shape, index
                ):
                    continue
                pool = self.victim_pool(workload, index, include_protected=False)
            elif pool.hopeless(shape, index):
                continue
            choice = choose_victims(shape, index, pool)
            if choice is not None and worth_losing(choice[1], workload, self.now, self.config):
                placement, victims = choice
                for victim in victims:
                    self._evict(victim, workload)
                return Preempted(placement, index, victims)
        failed = self.no_preempt[memo_key] = Attempt(
            shape, workload.allocation, workload.user, workload.priority
        )
        return failed

    def blocked_by_protection(
        self, workload: PendingWorkload, shape: Shape, index: FreeIndex
    ) -> float | None:
        """Until when protected work stands in the way, when it is all that does; else None."""
        pool = self.victim_pool(workload, index, include_protected=False)
        wider = self.victim_pool(workload, index, include_protected=True)
        if len(wider.ordered) == len(pool.ordered) or wider.hopeless(shape, index):
            return None
        found = choose_victims(shape, index, wider)
        if found is None or not found[1]:  # no victim needed: it fits on GPUs free by now
            return None
        return max(victim.protected_until for victim in found[1])

    def blocked_by_loss(self, workload: PendingWorkload, shape: Shape, index: FreeIndex) -> float | None:
        """When the work it could replace has saved its progress, when the work its victims would
        throw away since their last checkpoints is all that stands in the way (the loss rules:
        ``rules.acceptable_loss``, ``rules.worth_losing``); else None (always, without a loss limit)."""
        if self.config.max_loss_per_gpu_s is None:
            return None
        wider = self.victim_pool(workload, index, include_protected=False, at_checkpoint=True)
        if wider.hopeless(shape, index):
            return None
        found = choose_victims(shape, index, wider)
        if found is None:
            return None
        saves = [
            next_checkpoint(victim, self.now)
            for victim in found[1]
            if work_lost(victim, self.now, self.config)[0] > 0
        ]
        return max((at for at in saves if at is not None), default=None)

    def victim_pool(
        self,
        workload: PendingWorkload,
        index: FreeIndex,
        include_protected: bool,
        at_checkpoint: bool = False,
    ) -> VictimPool:
        """Who ``workload`` may preempt now on ``index``'s nodes, in preemption order, cached until
        anything changes (``at_checkpoint``: resumable victims as at their next checkpoint)."""
        order = self.victims.victim_order(workload, include_protected, at_checkpoint)
        pool = order.pools.get(index)
        if pool is None:
            if order.victims is None:
                order.victims = self.victims.ordered_victims(order)
            pool = order.pools[index] = VictimPool(order.victims, index, self.capacity.occupants)
        return pool

    def _unordered_pool(self, order: _Order, index: FreeIndex) -> VictimPool:
        """``order``'s victims on ``index``'s nodes in no particular order, kept with the order:
        enough for ``VictimPool.hopeless``, which reads only who is in the pool (what they hold
        per node, which nodes they could clear), never in which order. Most attempts that pass
        ``_surely_hopeless`` are rejected by it, so the preemption order (tiers, a sort) is worked
        out only for the few that then search for victims."""
        pool = order.unordered.get(index)
        if pool is None:
            victims = list(
                chain.from_iterable(victims for _, _, victims in self.victims.victim_groups(order))
            )
            pool = order.unordered[index] = VictimPool(victims, index, self.capacity.occupants)
        return pool

    def _surely_hopeless(self, order: _Order, shape: Shape, index: FreeIndex) -> bool:
        """A cheap and sound verdict for a multi-node gang (most failed attempts): even if every
        unprotected workload of every allocation it may preempt were a victim, too few whole nodes
        could be cleared, so ``VictimPool.hopeless`` would say so too. False: look closer."""
        if not self.standing.fairshare:
            return False
        gpus, per_node, gpu_type = shape
        largest = index.largest(gpu_type)
        if per_node is not None and per_node < gpus and per_node != largest:
            return False  # a spread: the search decides
        if (per_node is None or per_node >= gpus) and largest >= gpus:
            return False  # one node: the pool decides
        counted = order.clearable  # an order lives one standing, so one relief: counts keep
        for (kind, size), (whole, needs) in self.capacity.clearable.on(
            index, self.changes.relief, self.needs_by_node
        ).items():
            if gpu_type in (None, kind) and size and gpus % size == 0 and per_node in (None, size):
                if whole * size >= gpus:
                    return False
                count = counted.get((index, kind, size))
                if count is None:
                    count = counted[(index, kind, size)] = whole + self.victims.reachable(order, needs)
                if count * size >= gpus:
                    return False
        return True

    def needs_by_node(self) -> dict[str, frozenset | None]:
        """Occupied node -> the funded allocations whose work on it must all be preemptible to
        clear it (unfunded work always is), or None when it holds work that cannot be (protected,
        or started at ``now``). Made once per pass, then kept by ``_occupy_new`` and ``_evict``;
        read off the carried filing's ``KeptNeeds`` where it has them (``_kept_node_needs``)."""
        needs = self.node_needs
        if needs is None and self.capacity.kept_needs is not None:
            return self._kept_node_needs(self.capacity.kept_needs)
        if needs is None:
            needs = self.node_needs = {
                name: self._node_need(here) for name, here in self.capacity.occupants.items() if here
            }
        return needs

    def _kept_node_needs(self, kept: KeptNeeds) -> dict[str, frozenset | None]:
        """``needs_by_node`` from what earlier passes kept for the nodes whose occupants have not
        changed since (the base empties a node's entries when they do): a settled need holds at
        any later ``now``, a node blocked by protection stays blocked while ``now`` is before the
        earliest protection there ends. Nodes this pass started or evicted work on are worked out
        from the pass's own lists and not kept; the other nodes worked out are kept for the next
        passes. Which nodes are read in which order is moot: the pass only looks needs up."""
        now, shielding, occupants = self.now, self.config.contract, self.capacity.occupants
        if kept.shielding != shielding:
            kept.settled.clear()
            kept.blocked.clear()
            kept.shielding = shielding
        changed = self.evicted_nodes | self.started_nodes
        settled, blocked = kept.settled, kept.blocked
        needs: dict[str, frozenset | None]
        until: float | None
        needs = self.node_needs = settled.copy()  # type: ignore[assignment]  # a copy: None values are added below
        if blocked and now < min(blocked.values()):  # (an until is never NaN: it was > a now)
            needs.update(dict.fromkeys(blocked))  # every one still blocked (most passes)
        else:
            expired = []
            for name, until in blocked.items():
                if now < until:
                    needs[name] = None
                else:
                    expired.append(name)
            for name in expired:
                del blocked[name]
        for name in changed:
            needs.pop(name, None)
        for name in occupants.keys() - needs.keys():
            here = occupants[name]
            if not here:
                continue
            need, until = self._node_need_until(here)
            needs[name] = need
            if until is not None and name not in changed:
                if need is None:
                    blocked[name] = until
                else:
                    settled[name] = need
        return needs

    def _node_need_until(self, here: list[RunningWorkload]) -> tuple[frozenset | None, float | None]:
        """(``_node_need``, until when it holds as ``now`` moves on: forever for a need, the
        earliest end of protection there for a node protection blocks, None for a node with work
        started at ``now``, which becomes a candidate at a later ``now``)."""
        now, contract = self.now, self.config.contract
        funded = set()
        until = None
        for occupant in here:
            if not occupant.started_at < now:  # never preempted at the instant it starts
                return None, None
            if is_protected(occupant, now, contract):
                if until is None or occupant.protected_until < until:
                    until = occupant.protected_until
            elif occupant.funded:
                funded.add(occupant.allocation)
        if until is not None:
            return None, until
        return frozenset(funded), _FOREVER

    def _node_need(self, here: list[RunningWorkload]) -> frozenset | None:
        """The funded allocations to preempt to clear a node holding ``here`` (None: it cannot
        be cleared now: see ``needs_by_node``)."""
        return self._node_need_until(here)[0]

    def started(self, workload: RunningWorkload) -> None:
        """``workload`` started now: never preempted in this pass, its nodes' needs say so."""
        self.started_nodes.update(name for name, _ in workload.placement)
        needs = self.node_needs
        if needs is not None:
            for name, _ in workload.placement:
                needs[name] = None

    def _evict(self, victim: RunningWorkload, preemptor: PendingWorkload) -> None:
        """Preempt ``victim`` for ``preemptor``: its GPUs come free and its standing is taken back.
        (A resumable victim goes back to pending: the pass requeues it, see ``Preempted``.)"""
        self.preemptions.append(Preemption(victim.id, victim.resumable, preemptor.id, self._why(victim)))
        self.capacity.vacate(victim)
        self.evicted_nodes.update(name for name, _ in victim.placement)
        needs = self.node_needs
        if needs is not None:
            occupants = self.capacity.occupants
            for name, _ in victim.placement:
                here = occupants[name]
                if here:
                    needs[name] = self._node_need(here)
                else:
                    needs.pop(name, None)
        if victim.funded:
            self.victims.forget(victim.allocation)
        self.standing.remove(victim, self.now)
        self.changes.freed()

    def _why(self, victim: RunningWorkload) -> str:
        if not self.standing.fairshare:
            return "a higher priority class needs the GPUs"
        return "rebalancing toward fair share" if victim.funded else "unfunded work yields to funded work"

    def none_may_preempt(self, queue) -> bool:  # noqa: ANN001 - a FairShareQueue or StaticQueue
        """No allocation still queued in ``queue`` may preempt anyone (a sound shortcut: it says
        so only when every attempt would find no victim allowed)."""
        if not self.config.preemption or self.config.ordering == "fifo":
            return True
        if not self.standing.fairshare:
            lowest = self._preemptible()
            return lowest is None or all(w.priority <= lowest for w in queue.queued())
        waiting = queue.funded_allocations()
        if not waiting:
            return True
        open_groups = cast("list[tuple[str, bool]]", self._preemptible())  # fair share: the groups
        if any(not funded for _, funded in open_groups):
            return not waiting
        ranks_at_or_below = self.standing.tree.ranks_at_or_below
        return not any(
            victim_allocation == allocation or ranks_at_or_below(victim_allocation, allocation)
            for allocation in waiting
            for victim_allocation, _ in open_groups
        )

    def _preemptible(self) -> list[tuple[str, bool]] | int | None:
        """Fair share: the candidate groups (allocation, funded) with work past its protection;
        else the lowest priority of any candidate (None: none). Kept until an eviction (relief)."""
        known, relief = self.preemptible, self.changes.relief
        if known is not None and known[0] == relief:
            return known[1]
        found: list[tuple[str, bool]] | int | None
        candidates = self.capacity.candidates
        if self.standing.fairshare:
            found = [key for key, running in candidates.items() if any(map(self._unprotected, running))]
        else:
            found = min((v.priority for running in candidates.values() for v in running), default=None)
        self.preemptible = (relief, found)
        return found

    def _unprotected(self, workload: RunningWorkload) -> bool:
        return not is_protected(workload, self.now, self.config.contract)


_FOREVER = float("inf")
