"""Phase 3 of a pass, preemption (DESIGN 5 step 5): who a funded workload that does not fit may
preempt, in which order, and what happens to the victims. Mixed into the pass (planner.py)."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

from scheduling.policy.filing import drop_identical
from scheduling.policy.node_keys import KeptNeeds
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preemption import VictimPool, choose_victims
from scheduling.policy.replay import as_pending, single_type
from scheduling.policy.rules import is_protected, work_lost
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

    def _victim_order(self, workload: PendingWorkload, include_protected: bool) -> _Order:
        """Whose work ``workload`` may preempt in this standing, as the first workload of its key
        (allocation, its user when its own work is a candidate, priority, ``include_protected``)
        decides it: later ones of the key, whatever their GPUs, reuse the order until the
        generation changes. Nothing is worked out here (``_allowed``, ``_reachable``): an order is
        read only in the generation it was made in, in which nothing it reads changes (the tree
        is charged only by a start or an eviction, each a new generation), so working it out
        later gives what working it out now would. Most attempts never need the whole of it."""
        own = self.candidates.get((workload.allocation, True))
        key = (workload.allocation, workload.user if own else None, workload.priority, include_protected)
        cached = self.pools.get(key)
        if cached is not None and cached[0] == self.generation:
            return cached[1]
        order = _Order(workload, self.generation, include_protected)
        self.pools[key] = (self.generation, order)
        return order

    def _allowed(self, order: _Order) -> dict:
        """``order``'s ``_allowed_allocations``, worked out the first time it is asked for."""
        allowed = order.allowed
        if allowed is None:
            assert order.generation == self.generation, "an order is read in its own standing only"
            allowed = order.allowed = self._allowed_allocations(order)
        return allowed

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

    def _reachable(self, order: _Order, needs: dict[frozenset, int]) -> int:
        """How many of the nodes ``needs`` counts (funded allocations to preempt -> nodes) are
        nodes ``order`` may clear: those whose every allocation is a key of its ``allowed``. Each
        allocation is judged alone, once per order, as ``_allowed_allocations`` judges it (most
        preemptors may take from few of them, so the whole of ``allowed`` is rarely needed)."""
        allowed = order.allowed
        if allowed is not None:
            keys = allowed.keys()
            return sum(nodes for allocations, nodes in needs.items() if allocations <= keys)
        assert order.generation == self.generation, "an order is read in its own standing only"
        known, candidates, preemptor = order.reach, self.candidates, order.workload.allocation
        ranks_at_or_below, charged = self.tree.ranks_at_or_below, self._charged(order)
        count = 0
        for allocations, nodes in needs.items():
            if not nodes:  # (a carried count may keep an entry of no nodes: nothing to judge)
                continue
            for allocation in allocations:
                verdict = known.get(allocation)
                if verdict is None:
                    if allocation == preemptor:
                        verdict = bool(self._peers(order))
                    else:  # the test of ``_allowed_allocations``, for this key alone
                        verdict = (allocation, True) in candidates and ranks_at_or_below(
                            allocation, preemptor, charged
                        )
                    known[allocation] = verdict
                if not verdict:
                    break
            else:
                count += nodes
        return count

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
        # (``copy`` clones the table, holes of forgotten nodes and all; ``dict`` inserts one by one)
        needs = self.node_needs = settled.copy()
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

    def _victim_groups(self, order: _Order) -> list[tuple[str, bool, list[RunningWorkload]]]:
        """(allocation, funded, its work ``order``'s workload may preempt) per candidate group
        with any, in the candidates' order; made once per order."""
        groups = order.groups
        if groups is not None:
            return groups
        assert order.generation == self.generation, "an order is read in its own standing only"
        allowed = self._allowed(order)
        shielding = self.config.contract and not order.include_protected
        groups = order.groups = []
        for key, running in self.candidates.items():
            allocation, funded = key
            verdict = allowed.get(allocation) if funded or not self.fairshare else True
            if running and verdict is not None:
                running = self._in_order(key, running)  # before _unshielded keeps a copy of it
                if shielding and funded:
                    running = self._unshielded(allocation, running)
                groups.append(
                    (allocation, funded, running if verdict is True else list(filter(verdict, running)))
                )
        return groups

    def _ordered_victims(self, order: _Order) -> list[RunningWorkload]:
        """Who may be preempted, in preemption order (see preemption.py), by the standing
        ``order`` was decided in."""
        # the tiers read the tree as it is: the standing ``order`` was decided in
        assert order.generation == self.generation, "an order is read in its own standing only"
        # the global ratios (and sibling sums) read the standing alone: every order of it shares them
        tiers = self.pools.get(_TIERS)
        if tiers is None or tiers[0] != self.generation:
            tiers = self.pools[_TIERS] = (self.generation, ({}, {}))
        ratios, sums = tiers[1]
        groups = [
            (self._tier(allocation, funded, ratios, sums), allocation, funded, victims)
            for allocation, funded, victims in self._victim_groups(order)
        ]
        groups.sort(key=lambda group: group[:3])
        ordered: list[RunningWorkload] = []
        for *_, victims in groups:
            ordered.extend(victims)
        if not self.fairshare:
            ordered.sort(key=lambda victim: (victim.priority, *work_lost(victim, self.now)))
        return ordered

    def _in_order(self, key: tuple[str, bool], running: list[RunningWorkload]) -> list[RunningWorkload]:
        """``running``, the candidates of ``key``, in preemption order: the carried filing hands
        the work that is not resumable (it follows the resumable work) out in start order, and it
        is sorted by work lost at ``now`` the first time a victim order reads it (``_victim_groups``,
        before ``_unshielded`` keeps a copy): few passes read any victims, and those read few
        keys'. The same stable sort as afresh."""
        if not self.candidates_ordered and key not in self.ordered_keys:
            self.ordered_keys.add(key)
            split = next((at for at, victim in enumerate(running) if not victim.resumable), len(running))
            if len(running) - split > 1:
                running[split:] = sorted(running[split:], key=lambda victim: work_lost(victim, self.now))
        return running

    def _unshielded(self, allocation: str, running: list[RunningWorkload]) -> list[RunningWorkload]:
        """The funded ``running`` of ``allocation`` past their protection, in order; kept until one
        of them is evicted (the candidates change only then)."""
        kept = self.unshielded.get(allocation)
        if kept is None:
            now = self.now
            kept = self.unshielded[allocation] = [v for v in running if not is_protected(v, now, True)]
        return kept

    def _tier(
        self,
        allocation: str,
        funded: bool,
        ratios: dict[str, float],
        sums: dict[str, float],
        usage: dict[str, float] | None = None,
    ) -> tuple:
        """Unfunded first, then the most over-served allocation (largest global usage/budget ratio).
        ``ratios`` memoizes the global ratio per allocation and ``sums`` each sibling set's usage
        (see ``FairTree.level_ratio``) while the standing does not change; ``usage``: that standing."""
        if not self.fairshare:
            return ()
        if allocation not in ratios:
            ratios[allocation] = self._global_ratio(allocation, sums, usage)
        return (funded, -ratios[allocation])

    def _allowed_allocations(self, order: _Order) -> dict:
        """allocation -> True (its funded work may be preempted) or a per-victim test; absent: no.
        Unfunded victims are always allowed for a funded preemptor (its caller checks that).
        Decided for ``order``'s workload (``_reachable`` judges single keys alike)."""
        workload = order.workload
        if not self.fairshare:
            test = lambda victim: victim.priority < workload.priority  # noqa: E731
            return {allocation: test for allocation, _ in self.candidates}
        # As if charged: the comparisons read the charged values on the side; the tree itself is
        # not changed, so an attempt (even one a walk that records nothing skips) moves no standing.
        preemptor, charged = workload.allocation, self._charged(order)
        ranks_at_or_below = self.tree.ranks_at_or_below
        allowed: dict = {
            allocation: True
            for allocation, funded in self.candidates
            if funded and allocation != preemptor and ranks_at_or_below(allocation, preemptor, charged)
        }
        peers = self._peers(order)
        if peers:
            allowed[preemptor] = lambda victim: victim.user in peers
        return allowed

    def _charged(self, order: _Order) -> dict[str, float]:
        """The preemptor's chain as charging ``order``'s workload would leave it (made once)."""
        charged = order.charged
        if charged is None:
            workload = order.workload
            charged = order.charged = self.tree.charged_usage(
                workload.allocation, workload.gpus * self.charge_s
            )
        return charged

    def _peers(self, order: _Order) -> set[str]:
        """The other users of the preemptor's allocation whose work it may preempt: those with
        at least the usage its own user would have once charged (made once)."""
        peers = order.peers
        if peers is None:
            workload = order.workload
            preemptor, user, charge = workload.allocation, workload.user, workload.gpus * self.charge_s
            usage = self.tree.user_usage
            mine = usage.get((preemptor, user), 0.0) + charge
            # each user once (an allocation runs many workloads of few users), read in C
            others = set(map(_USER, self.candidates.get((preemptor, True), ())))
            others.discard(user)
            peers = order.peers = {other for other in others if usage.get((preemptor, other), 0.0) >= mine}
        return peers

    def _global_ratio(
        self, allocation: str, sums: dict[str, float] | None = None, usage: dict[str, float] | None = None
    ) -> float:
        ratio = 1.0
        for path in self.tree.ancestors.get(allocation, ()):
            ratio *= self.tree.level_ratio(path, sums, usage)
        return ratio

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


_USER = attrgetter("user")
_FOREVER = float("inf")
_TIERS = ("tiers",)  # ``pools`` key of a standing's global ratios (``_ordered_victims``)


class _Order:
    """Whose work a preemptor may preempt, as decided in one standing (generation) for
    ``workload``, the first of its key: ``allowed`` (see ``_allowed_allocations``), or single
    verdicts (``reach``: allocation -> may it be taken from); the listing and pools once made."""

    __slots__ = (
        "allowed",
        "charged",
        "clearable",
        "generation",
        "groups",
        "include_protected",
        "peers",
        "pools",
        "reach",
        "unordered",
        "victims",
        "workload",
    )

    def __init__(self, workload: PendingWorkload, generation: int, include_protected: bool = False) -> None:
        self.workload = workload
        self.generation = generation
        self.include_protected = include_protected
        self.allowed: dict | None = None  # worked out when first needed (``Preempting._allowed``)
        self.charged: dict[str, float] | None = None
        self.peers: set[str] | None = None
        self.reach: dict[str, bool] = {}  # funded allocation -> a key of ``allowed``?
        self.victims: list[RunningWorkload] | None = None
        self.groups: list[tuple[str, bool, list[RunningWorkload]]] | None = None  # _victim_groups
        self.pools: dict[FreeIndex, VictimPool] = {}  # index -> its pool: an order lives one standing
        self.unordered: dict[FreeIndex, VictimPool] = {}  # index -> its pool in no order (_unordered_pool)
        self.clearable: dict[tuple, int] = {}  # (index, type, size) -> nodes it could clear
