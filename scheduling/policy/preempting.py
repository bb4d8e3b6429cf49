"""Phase 3 of a pass, preemption (DESIGN 5 step 5): who a funded workload that does not fit may
preempt, in which order, and what happens to the victims. Mixed into the pass (planner.py)."""

from __future__ import annotations

from itertools import chain

from scheduling.policy.filing import drop_identical
from scheduling.policy.node_keys import KeptNeeds
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preemption import VictimPool, choose_victims
from scheduling.policy.replay import as_pending, single_type
from scheduling.policy.rules import is_protected
from scheduling.policy.types import PendingWorkload, Preemption, RunningWorkload
from scheduling.policy.victims import Victims, _Order


class Preempting(Victims):
    """The preemption half of ``planner._Pass``; it reads and updates the pass's state."""

    # -- preempt -------------------------------------------------------------------------------
    def _may_preempt(self, workload: PendingWorkload) -> bool:
        if not self.config.preemption or self.config.ordering == "fifo":
            return False
        return self.config.ordering == "priority" or self._funded(workload)

    def _may_preempt_or_fifo(self, workload: PendingWorkload) -> bool:
        return not self.fairshare or self._funded(workload)

    def _preempt(self, workload: PendingWorkload, shape: Shape, backfill: bool) -> tuple[bool, tuple | None]:
        """Preempt on unreserved nodes, or also on reserved ones for work that may backfill them."""
        memo_key = (shape, workload.allocation, workload.priority, backfill)
        if memo_key in self.no_preempt:
            return False, self.no_preempt[memo_key]
        indexes = (self.index, self.reserved) if backfill and self.reserved.spec else (self.index,)
        order = self._victim_order(workload, False)  # (when the original decided it: see there)
        for index in indexes:
            pool = order.pools.get(index)
            if pool is None:  # a pool already made rejects as cheaply as the bound
                if self._surely_hopeless(order, shape, index) or self._unordered_pool(order, index).hopeless(
                    shape, index
                ):
                    continue
                pool = self._victim_pool(workload, index, include_protected=False)
            elif pool.hopeless(shape, index):
                continue
            choice = choose_victims(shape, index, pool)
            if choice is not None:
                placement, victims = choice
                for victim in victims:
                    self._evict(victim, workload)
                self._start(workload, placement, index)
                return True, None
        # Whether protected work is what stands in the way is worked out once, when explaining.
        blocked_by = ("check_protected", shape, workload.allocation, workload.user, workload.priority)
        self.no_preempt[memo_key] = blocked_by
        return False, blocked_by

    def _blocked_by_protection(
        self, workload: PendingWorkload, shape: Shape, pool: VictimPool, index: FreeIndex
    ) -> tuple | None:
        """("protected", until) when protected work is all that stands in the way, else None."""
        wider = self._victim_pool(workload, index, include_protected=True)
        if len(wider.ordered) == len(pool.ordered) or wider.hopeless(shape, index):
            return None
        found = choose_victims(shape, index, wider)
        if found is None or not found[1]:  # no victim needed: it fits on GPUs free by now
            return None
        return ("protected", max(victim.protected_until for victim in found[1]))

    def _victim_pool(
        self, workload: PendingWorkload, index: FreeIndex, include_protected: bool
    ) -> VictimPool:
        """Who ``workload`` may preempt now on ``index``'s nodes, in preemption order, cached until
        anything changes."""
        order = self._victim_order(workload, include_protected)
        pool = order.pools.get(index)
        if pool is None:
            if order.victims is None:
                order.victims = self._ordered_victims(order)
            pool = order.pools[index] = VictimPool(order.victims, index, self.occupants)
        return pool

    def _unordered_pool(self, order: _Order, index: FreeIndex) -> VictimPool:
        """``order``'s victims on ``index``'s nodes in no particular order, kept with the order:
        enough for ``VictimPool.hopeless``, which reads only who is in the pool (what they hold
        per node, which nodes they could clear), never in which order. Most attempts that pass
        ``_surely_hopeless`` are rejected by it, so the preemption order (tiers, a sort) is worked
        out only for the few that then search for victims."""
        pool = order.unordered.get(index)
        if pool is None:
            victims = list(chain.from_iterable(victims for _, _, victims in self._victim_groups(order)))
            pool = order.unordered[index] = VictimPool(victims, index, self.occupants)
        return pool

    def _surely_hopeless(self, order: _Order, shape: Shape, index: FreeIndex) -> bool:
        """A cheap and sound verdict for a multi-node gang (most failed attempts): even if every
        unprotected workload of every allocation it may preempt were a victim, too few whole nodes
        could be cleared, so ``VictimPool.hopeless`` would say so too. False: look closer."""
        if not self.fairshare:
            return False
        gpus, per_node, gpu_type = shape
        largest = index.largest(gpu_type)
        if per_node is not None and per_node < gpus and per_node != largest:
            return False  # a spread: the search decides
        if (per_node is None or per_node >= gpus) and largest >= gpus:
            return False  # one node: the pool decides
        counted = order.clearable  # an order lives one standing, so one relief: counts keep
        for (kind, size), (whole, needs) in self.clearable.on(index, self.relief, self._node_needs).items():
            if gpu_type in (None, kind) and size and gpus % size == 0 and per_node in (None, size):
                if whole * size >= gpus:
                    return False
                count = counted.get((index, kind, size))
                if count is None:
                    count = counted[(index, kind, size)] = whole + self._reachable(order, needs)
                if count * size >= gpus:
                    return False
        return True

    def _node_needs(self) -> dict[str, frozenset | None]:
        """Occupied node -> the funded allocations whose work on it must all be preemptible to
        clear it (unfunded work always is), or None when it holds work that cannot be (protected,
        or started at ``now``). Made once per pass, then kept by ``_occupy_new`` and ``_evict``;
        read off the carried filing's ``KeptNeeds`` where it has them (``_kept_node_needs``)."""
        needs = self.node_needs
        if needs is None and self.kept_needs is not None:
            return self._kept_node_needs(self.kept_needs)
        if needs is None:
            needs = self.node_needs = {
                name: self._node_need(here) for name, here in self.occupants.items() if here
            }
        return needs

    def _kept_node_needs(self, kept: KeptNeeds) -> dict[str, frozenset | None]:
        """``_node_needs`` from what earlier passes kept for the nodes whose occupants have not
        changed since (the base empties a node's entries when they do): a settled need holds at
        any later ``now``, a node blocked by protection stays blocked while ``now`` is before the
        earliest protection there ends. Nodes this pass started or evicted work on are worked out
        from the pass's own lists and not kept; the other nodes worked out are kept for the next
        passes. Which nodes are read in which order is moot: the pass only looks needs up."""
        now, shielding, occupants = self.now, self.config.contract, self.occupants
        if kept.shielding != shielding:
            kept.settled.clear()
            kept.blocked.clear()
            kept.shielding = shielding
        changed = set(self.evicted_nodes)
        for start in self.starts:
            changed.update(name for name, _ in start.placement)
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
        be cleared now: see ``_node_needs``)."""
        return self._node_need_until(here)[0]

    def _evict(self, victim: RunningWorkload, preemptor: PendingWorkload) -> None:
        why = "unfunded work yields to funded work" if not victim.funded else "rebalancing toward fair share"
        if not self.fairshare:
            why = "a higher priority class needs the GPUs"
        self.preemptions.append(Preemption(victim.id, victim.resumable, preemptor.id, why))
        self.index.give(victim.placement)
        self.reserved.give(victim.placement)
        self.clearable.recount([name for name, _ in victim.placement])
        self.evicted_nodes.update(name for name, _ in victim.placement)
        needs = self.node_needs
        for name, _ in victim.placement:
            # a copy without it (the list may be the carried filing's own; equal is not enough)
            here = self.occupants[name] = [
                occupant for occupant in self.occupants[name] if occupant is not victim
            ]
            self.touched.add(name)
            if needs is not None:
                if here:
                    needs[name] = self._node_need(here)
                else:
                    needs.pop(name, None)
        drop_identical(self.candidates[(victim.allocation, victim.funded)], victim)
        if victim.funded:
            self.unshielded.pop(victim.allocation, None)
        for path in self.tree.ancestors.get(victim.allocation, ()):
            if path in self.used:
                self.used[path] -= victim.gpus
        if self.charge_s:
            owed = victim.gpus * max(0.0, self.charge_s - (self.now - victim.started_at))
            self.tree.charge(victim.allocation, victim.user, -owed)
        if victim.resumable:
            self._requeue(victim)
        self.no_fit.clear()
        self.no_fit_reserved.clear()
        self.generation += 1
        self.relief += 1

    def _requeue(self, victim: RunningWorkload) -> None:
        """A resumable victim is pending again at once, with its submit time, on the same GPU type:
        it may restart elsewhere in this very pass (a move), so the next pass has nothing left to
        cascade. If it does not restart it gets no reason here (it was not pending in the snapshot)."""
        workload = as_pending(victim, single_type(victim, self.gpu_types))
        self.requeued.add(workload.id)
        self.requeued_work[workload.id] = workload
        if self.fairshare and workload.allocation not in self.tree.funded:
            self.queues[1].requeue(workload)
        else:
            self.queues[0].requeue(workload)


_FOREVER = float("inf")
