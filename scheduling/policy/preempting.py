"""Phase 3 of a pass, preemption (DESIGN 5 step 5): who a funded workload that does not fit may
preempt, in which order, and what happens to the victims. Mixed into the pass (planner.py)."""

from __future__ import annotations

from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preemption import VictimPool, choose_victims
from scheduling.policy.replay import as_pending, single_type
from scheduling.policy.types import PendingWorkload, Preemption, RunningWorkload


class Preempting:
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
        for index in indexes:
            pool = self._victim_pool(workload, index, include_protected=False)
            choice = None if pool.hopeless(shape, index) else choose_victims(shape, index, pool)
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
        own = (workload.allocation, True) in self.candidates and self.candidates[(workload.allocation, True)]
        key = (
            workload.allocation,
            workload.user if own else None,
            workload.priority,
            include_protected,
            id(index),
        )
        cached = self.pools.get(key)
        if cached is not None and cached[0] == self.generation:
            return cached[1]
        order_key = key[:-1]  # the order is the same on every index: compute it once
        order = self.pools.get(order_key)
        if order is None or order[0] != self.generation:
            order = self.pools[order_key] = (
                self.generation,
                self._ordered_victims(workload, include_protected),
            )
        pool = VictimPool(order[1], index, self.occupants)
        self.pools[key] = (self.generation, pool)
        return pool

    def _ordered_victims(self, workload: PendingWorkload, include_protected: bool) -> list[RunningWorkload]:
        """Who ``workload`` may preempt now, in preemption order (see preemption.py)."""
        allowed = self._allowed_allocations(workload)
        groups, ratios, sums = [], {}, {}
        for (allocation, funded), running in self.candidates.items():
            verdict = allowed.get(allocation) if funded or not self.fairshare else True
            if running and verdict is not None:
                groups.append(
                    (self._tier(allocation, funded, ratios, sums), allocation, funded, verdict, running)
                )
        groups.sort(key=lambda group: group[:3])
        shielding = self.config.contract and not include_protected
        ordered: list[RunningWorkload] = []
        for _, allocation, funded, verdict, running in groups:
            if shielding and funded:
                running = self._unshielded(allocation, running)
            ordered.extend(running if verdict is True else filter(verdict, running))
        if not self.fairshare:
            ordered.sort(key=lambda victim: (victim.priority, *self._work_lost(victim)))
        return ordered

    def _unshielded(self, allocation: str, running: list[RunningWorkload]) -> list[RunningWorkload]:
        """The funded ``running`` of ``allocation`` past their protection, in order; kept until one
        of them is evicted (the candidates change only then)."""
        kept = self.unshielded.get(allocation)
        if kept is None:
            now = self.now
            kept = self.unshielded[allocation] = [v for v in running if not v.protected_until > now]
        return kept

    def _tier(self, allocation: str, funded: bool, ratios: dict[str, float], sums: dict[str, float]) -> tuple:
        """Unfunded first, then the most over-served allocation (largest global usage/budget ratio).
        ``ratios`` memoizes the global ratio per allocation and ``sums`` each sibling set's usage
        (see ``FairTree.level_ratio``) while the standing does not change."""
        if not self.fairshare:
            return ()
        if allocation not in ratios:
            ratios[allocation] = self._global_ratio(allocation, sums)
        return (funded, -ratios[allocation])

    def _allowed_allocations(self, workload: PendingWorkload) -> dict:
        """allocation -> True (its funded work may be preempted) or a per-victim test; absent: no.
        Unfunded victims are always allowed for a funded preemptor (its caller checks that)."""
        if not self.fairshare:
            test = lambda victim: victim.priority < workload.priority  # noqa: E731
            return {allocation: test for allocation, _ in self.candidates}
        tree, charge = self.tree, workload.gpus * self.charge_s
        tree.charge(workload.allocation, workload.user, charge)
        try:
            allowed: dict = {
                allocation: True
                for allocation, funded in self.candidates
                if funded
                and allocation != workload.allocation
                and tree.ranks_at_or_below(allocation, workload.allocation)
            }
            mine = tree.user_key(workload.allocation, workload.user)
            peers = {
                victim.user
                for victim in self.candidates.get((workload.allocation, True), ())
                if victim.user != workload.user and tree.user_key(workload.allocation, victim.user) >= mine
            }
        finally:
            tree.charge(workload.allocation, workload.user, -charge)
        if peers:
            allowed[workload.allocation] = lambda victim: victim.user in peers
        return allowed

    def _global_ratio(self, allocation: str, sums: dict[str, float] | None = None) -> float:
        ratio = 1.0
        for path in self.tree.ancestors.get(allocation, ()):
            ratio *= self.tree.level_ratio(path, sums)
        return ratio

    def _evict(self, victim: RunningWorkload, preemptor: PendingWorkload) -> None:
        why = "unfunded work yields to funded work" if not victim.funded else "rebalancing toward fair share"
        if not self.fairshare:
            why = "a higher priority class needs the GPUs"
        self.preemptions.append(Preemption(victim.id, victim.resumable, preemptor.id, why))
        self.index.give(victim.placement)
        self.reserved.give(victim.placement)
        for name, _ in victim.placement:
            self.occupants[name].remove(victim)
            self.touched.add(name)
        self.candidates[(victim.allocation, victim.funded)].remove(victim)
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
