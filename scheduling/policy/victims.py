"""Who a preemptor may take GPUs from, and in which order (DESIGN 5 step 5): the funded
allocations it may take from (the no-flip-flop rank rule, ``rules.may_take_from``), its own
allocation's users with at least its usage, unfunded work always; victims unfunded first, then
the most over-served allocation first, then the least work lost (``rules.work_lost``).
Owned by the pass's preemptor (preempting.py), whose attempts read these orders."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

from scheduling.policy.capacity import Capacity
from scheduling.policy.changes import Changes
from scheduling.policy.rules import (
    acceptable_loss,
    clear_gap,
    ends_work_allowed,
    goodput_victim_key,
    is_protected,
    loses_work_allowed,
    short_loss_bound,
    work_lost,
)
from scheduling.policy.standing import Standing
from scheduling.policy.types import PendingWorkload, PolicyConfig, RunningWorkload

if TYPE_CHECKING:
    from scheduling.policy.placement import FreeIndex
    from scheduling.policy.preemption import VictimPool


class VictimOrders:
    """Whose work each preemptor may take, per standing: it reads the capacity's candidates and
    the standing, and keeps the orders (``pools``) while the generation holds."""

    def __init__(
        self, capacity: Capacity, standing: Standing, changes: Changes, now: float, config: PolicyConfig
    ) -> None:
        self.capacity, self.standing, self.changes = capacity, standing, changes
        self.now, self.config = now, config
        # key -> (generation, _Order); under _TIERS: (generation, (ratios, sums))
        self.pools: dict[tuple, tuple[int, Any]] = {}
        self.unshielded: dict[str, list[RunningWorkload]] = {}  # see ``_unshielded``
        self.ordered_keys: set[tuple[str, bool]] = set()  # candidates put in order (``in_order``)

    def victim_order(
        self, workload: PendingWorkload, include_protected: bool, at_checkpoint: bool = False
    ) -> _Order:
        """Whose work ``workload`` may preempt in this standing, as the first workload of its key
        (allocation, its user when its own work is a candidate, priority, ``include_protected``,
        ``at_checkpoint``: resumable victims judged as at their next checkpoint; for short work,
        what its victims may lose, ``rules.short_loss_bound``) decides it:
        later ones of the key, whatever their GPUs, reuse the order until the generation changes.
        Nothing is worked out here (``_allowed``, ``_reachable``): an order is read only in the
        generation it was made in, in which nothing it reads changes (the tree is charged only by
        a start or an eviction, each a new generation), so working it out later gives what
        working it out now would. Most attempts never need the whole of it."""
        own = self.capacity.candidates.get((workload.allocation, True))
        key = (
            workload.allocation,
            workload.user if own else None,
            workload.priority,
            include_protected,
            at_checkpoint,
            short_loss_bound(workload, self.config),
        )
        cached = self.pools.get(key)
        if cached is not None and cached[0] == self.changes.generation:
            return cached[1]
        order = _Order(workload, self.changes.generation, include_protected, at_checkpoint)
        self.pools[key] = (self.changes.generation, order)
        return order

    def allowed(self, order: _Order) -> dict:
        """``order``'s ``_allowed_allocations``, worked out the first time it is asked for."""
        allowed = order.allowed
        if allowed is None:
            assert order.generation == self.changes.generation, "an order is read in its own standing only"
            allowed = order.allowed = self.allowed_allocations(order)
        return allowed

    def reachable(self, order: _Order, needs: dict[frozenset, int]) -> int:
        """How many of the nodes ``needs`` counts (funded allocations to preempt -> nodes) are
        nodes ``order`` may clear: those whose every allocation is a key of its ``allowed``. Each
        allocation is judged alone, once per order, as ``_allowed_allocations`` judges it (most
        preemptors may take from few of them, so the whole of ``allowed`` is rarely needed)."""
        allowed = order.allowed
        if allowed is not None:
            keys = allowed.keys()
            return sum(nodes for allocations, nodes in needs.items() if allocations <= keys)
        assert order.generation == self.changes.generation, "an order is read in its own standing only"
        known, preemptor = order.reach, order.workload.allocation
        count = 0
        for allocations, nodes in needs.items():
            if not nodes:  # (a carried count may keep an entry of no nodes: nothing to judge)
                continue
            for allocation in allocations:
                verdict = known.get(allocation)
                if verdict is None:
                    if allocation == preemptor:
                        verdict = bool(self.peers(order))
                    else:
                        verdict = self.takes_from(order, allocation)
                    known[allocation] = verdict
                if not verdict:
                    break
            else:
                count += nodes
        return count

    def victim_groups(self, order: _Order) -> list[tuple[str, bool, list[RunningWorkload]]]:
        """(allocation, funded, its work ``order``'s workload may preempt) per candidate group
        with any, in the candidates' order; made once per order."""
        groups = order.groups
        if groups is not None:
            return groups
        assert order.generation == self.changes.generation, "an order is read in its own standing only"
        allowed = self.allowed(order)
        shielding = self.config.contract and not order.include_protected
        groups = order.groups = []
        for key, running in self.capacity.candidates.items():
            allocation, funded = key
            verdict = allowed.get(allocation) if funded or not self.standing.fairshare else True
            if running and verdict is not None:
                running = self.in_order(key, running)  # before _unshielded keeps a copy of it
                if shielding and funded:
                    running = self.unshielded_of(allocation, running)
                groups.append(
                    (allocation, funded, running if verdict is True else list(filter(verdict, running)))  # type: ignore[arg-type]  # a verdict not True is a per-victim test
                )
        return groups

    def ordered_victims(self, order: _Order) -> list[RunningWorkload]:
        """Who may be preempted, in preemption order (see preemption.py), by the standing
        ``order`` was decided in."""
        # the tiers read the tree as it is: the standing ``order`` was decided in
        assert order.generation == self.changes.generation, "an order is read in its own standing only"
        ratios, sums = self.standing_ratios()
        groups = [
            (self.tier(allocation, funded, ratios, sums), allocation, funded, victims)
            for allocation, funded, victims in self.victim_groups(order)
        ]
        groups.sort(key=lambda group: group[:3])
        ordered: list[RunningWorkload] = []
        for *_, victims in groups:
            ordered.extend(victims)
        now, config = self.now, self.config
        if not self.standing.fairshare:
            ordered.sort(key=lambda victim: (victim.priority, *work_lost(victim, now, config)))
        elif config.goodput_victims:
            ordered.sort(key=lambda victim: goodput_victim_key(victim, now, config))
        return ordered

    def in_order(self, key: tuple[str, bool], running: list[RunningWorkload]) -> list[RunningWorkload]:
        """``running``, the candidates of ``key``, in preemption order (``rules.work_lost``), sorted
        the first time a victim order reads it (``victim_groups``, before ``unshielded_of`` keeps a
        copy): few passes read any victims, and those read few keys'. The carried filing hands the
        work that is not resumable (it follows the resumable work) out in start order; weighing
        checkpoints, resumable work too is sorted. The same stable sort as afresh."""
        if key in self.ordered_keys:
            return running
        now, config = self.now, self.config
        if config.goodput_victims:
            self.ordered_keys.add(key)
            running.sort(key=lambda victim: work_lost(victim, now, config))
        elif not self.capacity.candidates_ordered:
            self.ordered_keys.add(key)
            split = next((at for at, victim in enumerate(running) if not victim.resumable), len(running))
            if len(running) - split > 1:
                running[split:] = sorted(running[split:], key=lambda victim: work_lost(victim, now))
        return running

    def unshielded_of(self, allocation: str, running: list[RunningWorkload]) -> list[RunningWorkload]:
        """The funded ``running`` of ``allocation`` past their protection, in order; kept until one
        of them is evicted (the candidates change only then)."""
        kept = self.unshielded.get(allocation)
        if kept is None:
            now = self.now
            kept = self.unshielded[allocation] = [v for v in running if not is_protected(v, now, True)]
        return kept

    def forget(self, allocation: str) -> None:
        """``allocation`` lost a victim: its unshielded work is listed again when next read."""
        self.unshielded.pop(allocation, None)

    def standing_ratios(self) -> tuple[dict[str, float], dict[str, float]]:
        """The global ratios per allocation and the sibling sums (``tier``, ``ratio``) of the
        standing as it is: they read the standing alone, so every order and verdict of one
        generation shares them."""
        tiers = self.pools.get(_TIERS)
        if tiers is None or tiers[0] != self.changes.generation:
            tiers = self.pools[_TIERS] = (self.changes.generation, ({}, {}))
        return tiers[1]

    def ratio(self, allocation: str) -> float:
        """``allocation``'s global usage/budget ratio in the standing as it is (``global_ratio``,
        worked out once per generation)."""
        ratios, sums = self.standing_ratios()
        found = ratios.get(allocation)
        if found is None:
            found = ratios[allocation] = self.global_ratio(allocation, sums)
        return found

    def tier(
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
        if not self.standing.fairshare:
            return ()
        if allocation not in ratios:
            ratios[allocation] = self.global_ratio(allocation, sums, usage)
        return (funded, -ratios[allocation])

    def allowed_allocations(self, order: _Order) -> dict:
        """allocation -> True (its funded work may be preempted) or a per-victim test; absent: no.
        Unfunded victims are always allowed for a funded preemptor (its caller checks that).
        Decided for ``order``'s workload (``_reachable`` judges single keys alike)."""
        workload = order.workload
        if not self.standing.fairshare:
            test = lambda victim: victim.priority < workload.priority  # noqa: E731
            return {allocation: test for allocation, _ in self.capacity.candidates}
        # As if charged: the comparisons read the charged values on the side; the tree itself is
        # not changed, so an attempt (even one a walk that records nothing skips) moves no standing.
        preemptor = workload.allocation
        verdict = self._verdict(order)
        allowed: dict = {
            allocation: verdict
            for allocation, funded in self.capacity.candidates
            if funded and allocation != preemptor and self.takes_from(order, allocation)
        }
        peers = self.peers(order)
        if peers:
            within = self._verdict(order, peer=True)
            if within is True:
                allowed[preemptor] = lambda victim: victim.user in peers
            else:
                allowed[preemptor] = lambda victim: victim.user in peers and within(victim)
        return allowed

    def takes_from(self, order: _Order, allocation: str) -> bool:
        """May ``order``'s workload preempt the funded work of ``allocation``, another allocation
        with candidates? Only if it still ranks at or below the preemptor's after the move (the
        no-flip-flop rule, ``rules.may_take_from``, read as if charged: the tree is not changed,
        so an attempt moves no standing) and, with a hysteresis, by a clear gap (``rules.clear_gap``)."""
        preemptor = order.workload.allocation
        if (allocation, True) not in self.capacity.candidates:
            return False
        if not self.standing.tree.ranks_at_or_below(allocation, preemptor, self.charged(order)):
            return False
        if self.config.rebalance_hysteresis <= 0:
            return True
        return clear_gap(self.ratio(allocation), self.ratio(preemptor), self.config)

    def _verdict(
        self, order: _Order, peer: bool = False
    ) -> Callable[[RunningWorkload], bool] | Literal[True]:
        """What may be taken from an allowed funded allocation (``peer``: from the other users of
        the preemptor's own): all of its candidates, or only the work whose loss is acceptable
        (``rules.acceptable_loss``): ending work needs a clearer margin than the preemptor may
        have (``rules.ends_work_allowed``), and never a peer's; losing work since a checkpoint
        needs the preemptor under its share (``rules.loses_work_allowed``), unless it is short
        work, which may lose its ``rules.short_loss_bound`` whatever its standing."""
        config = self.config
        if config.end_work_margin <= 0 and config.max_loss_per_gpu_s is None:
            return True
        ratio = self.ratio(order.workload.allocation)
        may_end = ends_work_allowed(ratio, config)
        if may_end and config.max_loss_per_gpu_s is None:
            return True
        now, may_lose, at_checkpoint = self.now, loses_work_allowed(ratio), order.at_checkpoint
        may_end = may_end and not peer
        bound = short_loss_bound(order.workload, config)
        return lambda victim: acceptable_loss(victim, now, config, may_end, may_lose, at_checkpoint, bound)

    def charged(self, order: _Order) -> dict[str, float]:
        """The preemptor's chain as charging ``order``'s workload would leave it (made once)."""
        charged = order.charged
        if charged is None:
            workload = order.workload
            charged = order.charged = self.standing.tree.charged_usage(
                workload.allocation, workload.gpus * self.standing.charge_s
            )
        return charged

    def peers(self, order: _Order) -> set[str]:
        """The other users of the preemptor's allocation whose work it may preempt: those with
        at least the usage its own user would have once charged (made once)."""
        peers = order.peers
        if peers is None:
            workload = order.workload
            preemptor, user, charge = (
                workload.allocation,
                workload.user,
                workload.gpus * self.standing.charge_s,
            )
            usage = self.standing.tree.user_usage
            mine = usage.get((preemptor, user), 0.0) + charge
            others = set(map(_USER, self.capacity.candidates.get((preemptor, True), ())))
            others.discard(user)
            peers = order.peers = {other for other in others if usage.get((preemptor, other), 0.0) >= mine}
        return peers

    def global_ratio(
        self, allocation: str, sums: dict[str, float] | None = None, usage: dict[str, float] | None = None
    ) -> float:
        ratio = 1.0
        for path in self.standing.tree.ancestors.get(allocation, ()):
            ratio *= self.standing.tree.level_ratio(path, sums, usage)
        return ratio


_USER = attrgetter("user")
_RESUMABLE = attrgetter("resumable")
_TIERS = ("tiers",)  # ``pools`` key of a standing's global ratios (``_ordered_victims``)


class _Order:
    """Whose work a preemptor may preempt, as decided in one standing (generation) for
    ``workload``, the first of its key: ``allowed`` (see ``_allowed_allocations``), or single
    verdicts (``reach``: allocation -> may it be taken from); the listing and pools once made."""

    __slots__ = (
        "allowed",
        "at_checkpoint",
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

    def __init__(
        self,
        workload: PendingWorkload,
        generation: int,
        include_protected: bool = False,
        at_checkpoint: bool = False,
    ) -> None:
        self.workload = workload
        self.generation = generation
        self.include_protected = include_protected
        self.at_checkpoint = at_checkpoint
        self.allowed: dict | None = None  # worked out when first needed (``VictimOrders.allowed``)
        self.charged: dict[str, float] | None = None
        self.peers: set[str] | None = None
        self.reach: dict[str, bool] = {}  # funded allocation -> a key of ``allowed``?
        self.victims: list[RunningWorkload] | None = None
        self.groups: list[tuple[str, bool, list[RunningWorkload]]] | None = None  # _victim_groups
        self.pools: dict[FreeIndex, VictimPool] = {}  # index -> its pool: an order lives one standing
        self.unordered: dict[FreeIndex, VictimPool] = {}  # index -> its pool in no order (_unordered_pool)
        self.clearable: dict[tuple, int] = {}  # (index, type, size) -> nodes it could clear
