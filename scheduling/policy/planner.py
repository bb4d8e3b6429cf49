"""``plan()``: one scheduling pass over a snapshot (DESIGN 5, phases 3 to 7), each phase timed.

1. Rank: order pending work (Fair Tree, or static priority / FIFO for the simulator's comparisons).
2. Admit: walk the order; place each workload (placement.py); a funded workload that does not fit
   may preempt (preempting.py, preemption.py); the best-ranked workload that still cannot start
   reserves the nodes that free up earliest (explaining.py, reservation.py) and later work only
   backfills them when it cannot delay it.
3. Explain: every workload still pending gets one reason, its position and an estimated start
   (explaining.py, reasons.py).

Deterministic: the pending queue is sorted by (submitted_at, id), every choice ends in a tie-break
on names or ids, and nothing reads a clock or a random source except the timers.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from itertools import chain
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import cast

from scheduling.policy import reasons, rules
from scheduling.policy.capacity import Capacity
from scheduling.policy.changes import Changes
from scheduling.policy.explaining import Explainer
from scheduling.policy.grouping import Grouped, Kinds, group_pending, kinds_after
from scheduling.policy.inventory import file_afresh, node_facts
from scheduling.policy.outcome_keys import OutcomeKey, Settled
from scheduling.policy.placement import FreeIndex
from scheduling.policy.preempting import Preempted, Preemptor
from scheduling.policy.queues import FairShareQueue, StaticQueue, priority_key, submit_key
from scheduling.policy.ranking import FairTree
from scheduling.policy.replay import as_pending, as_running, single_type
from scheduling.policy.reserving import Reserver
from scheduling.policy.session import PlanningSession
from scheduling.policy.shortcuts import Shortcuts
from scheduling.policy.standing import Standing
from scheduling.policy.types import (
    PendingWorkload,
    Placement,
    Plan,
    PolicyConfig,
    RunningWorkload,
    Snapshot,
    Start,
)
from scheduling.policy.victims import VictimOrders
from scheduling.policy.walk import Walk, still_pending

_SUBMIT_ORDER = attrgetter("submitted_at", "id")
_ALLOCATION = attrgetter("allocation")
_FIRST = itemgetter(0)
_SHAPE = attrgetter("gpus", "gpus_per_node", "gpu_type")
_WALKS = 4  # a first walk and up to three settling walks


Explain = bool | frozenset[int]


def plan(
    snapshot: Snapshot,
    now: float,
    config: PolicyConfig,
    *,
    session: PlanningSession | None = None,
    explain: Explain = True,
) -> Plan:
    """Decide starts, preemptions and reservations for one pass, and explain what stays pending.

    ``session``: what the caller carries from pass to pass (session.py); None, nothing: the plan
    is then a pure function of the arguments (with a session it is the same plan, made faster).
    ``explain``: True, a reason for every pending workload; False, none (``Plan.reasons`` is empty;
    the decisions are the same); a set of workload ids, only theirs, each exactly as True gives it."""
    return plan_grouped(snapshot, now, config, None, session=session, explain=explain)


def plan_grouped(
    snapshot: Snapshot,
    now: float,
    config: PolicyConfig,
    grouped: Grouped | None,
    *,
    session: PlanningSession | None = None,
    explain: Explain = True,
) -> Plan:
    """``plan``, given ``group_pending(snapshot.pending)`` already (None: group here). For callers
    that plan many variants of one snapshot (``options.start_options``) or keep the grouping from
    pass to pass (the simulator): a pass only reads ``grouped``, never changing its dict or lists."""
    if explain is not True and explain is not False:
        explain = frozenset(explain)
    if not snapshot.backend_available:
        return _backend_unavailable(snapshot, now, explain)
    collecting = gc.isenabled()
    gc.disable()  # a pass allocates ~2 objects per pending workload and frees none of them
    try:
        return _Pass(snapshot, now, config, grouped, explain, session).run()
    finally:
        if collecting:
            gc.enable()


def _backend_unavailable(snapshot: Snapshot, now: float, explain: Explain = True) -> Plan:
    outcome = reasons.backend_unavailable(snapshot.backend_name, snapshot.backend_error_at, now)
    pending = sorted(snapshot.pending, key=_SUBMIT_ORDER) if explain else ()
    chosen = [(w, i) for i, w in enumerate(pending, 1) if explain is True or w.id in explain]  # type: ignore[operator]  # explain False: pending is empty
    explained = reasons.Reasons(
        [workload for workload, _ in chosen],
        [outcome] * len(chosen),
        [position for _, position in chosen],
    )
    return Plan((), (), (), explained, MappingProxyType({}), MappingProxyType({}))


class _Pass:
    """One pass: its inputs, its decisions, and its parts (the standing, the capacity, the
    reserver, the preemptor, the explainer), made by the phases; ``run`` is the only entry."""

    def __init__(
        self,
        snapshot: Snapshot,
        now: float,
        config: PolicyConfig,
        grouped: Grouped | None,
        explain: Explain = True,
        session: PlanningSession | None = None,
    ) -> None:
        self.snapshot, self.now, self.config = snapshot, now, config
        self.session = session if session is not None else PlanningSession()  # None: a pure pass
        self.grouped = grouped
        self.explain = explain
        self.changes = Changes()
        self.timings: dict[str, float] = {}
        self.starts: list[Start] = []
        # walk order: (workload, its outcome key), or (None, an untried tail's groups: leave_untried)
        self.blocked: list[tuple[PendingWorkload, OutcomeKey] | tuple[None, list]] = []
        self.keys: dict[OutcomeKey, OutcomeKey] = {}  # outcome keys, interned
        self.requeued: dict[int, PendingWorkload] = {}  # preempted in this pass, back in the queue
        self.started_groups: dict[tuple[str, str], list[PendingWorkload]] = {}  # (allocation, user) ->
        # Every workload the last walk tried before its last start started: the walk from that
        # start on saw the state a settling walk would start from, in the order it would see it.
        self.tail_repeats = False

    # -- phases --------------------------------------------------------------------------------
    def run(self) -> Plan:
        self._timed("rank", self._rank)
        self._timed("index", self._index)
        self._timed("admit", self._admit)
        self.timings["admit"] -= self.timings.get("preempt", 0.0) + self.timings.get("reserve", 0.0)
        explainer, explain = self.explainer, self.explain
        if explain is True:
            explained = self._timed(
                "explain", lambda: explainer.explain(self.blocked, self.held, self.requeued)
            )
        elif explain is False:
            explained = reasons.Reasons([], [])
        else:
            wanted = cast("frozenset[int]", explain)
            explained = self._timed(
                "explain", lambda: explainer.explain_only(wanted, self.blocked, self.held, self.requeued)
            )
        return Plan(
            starts=tuple(self.starts),
            preemptions=tuple(self.preemptor.preemptions),
            reservations=(self.reserver.reservation,) if self.reserver.reservation else (),
            reasons=explained,
            fair_share=MappingProxyType(self.standing.tree.base_ratio),
            timings_ms=MappingProxyType({k: round(v * 1000.0, 3) for k, v in self.timings.items()}),
        )

    def _timed(self, phase: str, step: Callable):
        started = time.perf_counter()
        try:
            return step()
        finally:
            self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - started

    def _rank(self) -> None:
        """Phase 1: the Fair Tree charged with the running work (the standing), and the queues."""
        snapshot = self.snapshot
        groups, self.held, kinds = self.grouped or group_pending(snapshot.pending)
        self.groups, self.kinds = groups, kinds
        allocations = set(map(_FIRST, groups))  # every allocation met, for those the tree lacks
        carry = self.session.filing
        allocations.update(carry.allocations(snapshot.running), map(_ALLOCATION, self.held))
        tree = FairTree(
            snapshot.tree, snapshot.usage, snapshot.user_usage, allocations, self.session.tree_shapes
        )
        self.standing = Standing(tree, self.config)
        if self.standing.fairshare:
            tree.charge_running(snapshot.running, self.now, self.standing.charge_s, carry.in_start_order)
        self.queues = self._make_queues(groups, kinds)

    def _make_queues(self, groups: dict[tuple[str, str], list[PendingWorkload]], kinds: Kinds) -> list:
        """Funded work first, then unfunded (fair share); or one static order. ``kinds``: the
        workloads of ``groups`` by kind (``grouping.KIND``)."""
        if self.standing.fairshare:
            return FairShareQueue.funded_and_unfunded(self.standing.tree, groups, kinds)
        key = priority_key if self.config.ordering == "priority" else submit_key
        return [StaticQueue((w for queue in groups.values() for w in queue), key)]

    def _index(self) -> None:
        """Phase 2: the running work filed onto nodes, candidates and limits (the capacity):
        carried over from the pass before when the caller passes the same running objects again
        (filing.py), else afresh; and the parts that act on it."""
        snapshot, now, config, session = self.snapshot, self.now, self.config, self.session
        standing, tree, changes = self.standing, self.standing.tree, self.changes
        healthy, capacity, sizes, gpu_types = node_facts(snapshot.nodes, session)
        filed = session.filing.filed(
            snapshot.running, snapshot.nodes, healthy, capacity, tree.ancestors, tree.limit, now
        )
        if filed is None:
            filed = file_afresh(snapshot.running, healthy, capacity, tree.ancestors, tree.limit, now)
        standing.used = filed[2]
        healthy_gpus = sum(size * count for by_size in sizes.values() for size, count in by_size.items())
        lane = rules.short_lane_gpus(healthy_gpus, config)  # GPUs kept free for short work
        self.capacity = Capacity(snapshot, now, session, filed, sizes, gpu_types, lane, config)
        self.reserver = Reserver(self.capacity, standing, changes, now, config)
        self.preemptor = Preemptor(VictimOrders(self.capacity, standing, changes, now, config))
        self.explainer = Explainer(self.capacity, standing, self.reserver, self.preemptor, now, config)
        self.shortcuts = Shortcuts(self.capacity, self.reserver, self.preemptor)

    # -- admit ---------------------------------------------------------------------------------
    def _admit(self) -> None:
        """Phase 3: walk the order; then, while a walk changed anything, walk what is still
        pending again, in the standing the last walk ended with and with a fresh reservation (at
        most ``_WALKS``).

        The pass thus ends in a fixpoint: walking its result once more changes nothing. That is
        exactly what the next pass does with unchanged inputs, so it has nothing to undo (no
        flip-flop), even where the projected charge reordered work within this pass.

        Without reasons to record, a walk whose every workload tried before its last start did
        start needs no successor: from that start on it already walked what a settling walk would
        (the same workloads, standing, free GPUs and no reservation yet), so the next walk would
        decide nothing the last one did not. Not so for a settling walk that preempted: its
        victims wait for the next walk. (A walk that records reasons is still made.)
        """
        before = (0, 0)
        settle = self.config.settle
        preemptions = self.preemptor.preemptions
        Walk(self, self.queues, settle).run()
        for walk in range(2, _WALKS + 1 if settle else 0):
            after = (len(self.starts), len(preemptions))
            if after == before:
                break
            if self.tail_repeats and self.explain is False:
                break  # another walk would only repeat what followed this one's last start
            before = after
            Walk(self, self._queues_again(), walk < _WALKS).run()

    def _queues_again(self) -> list:
        """Everything still pending (``walk.still_pending``), for a settling walk that starts
        afresh: nothing blocked, nothing reserved, nothing known not to fit."""
        started = {start.workload_id for start in self.starts}
        groups = still_pending(self.groups, self.started_groups, self.requeued.values(), started)
        back = [workload for workload in self.requeued.values() if workload.id not in started]
        kinds = kinds_after(self.kinds, chain.from_iterable(self.started_groups.values()), back)
        self.blocked = []
        self.reserver.release()
        self.capacity.forget_no_fit()
        self.preemptor.no_preempt.clear()
        self.changes.freed()
        return self._make_queues(groups, kinds)

    def consider(self, workload: PendingWorkload) -> bool:
        """Start ``workload`` (possibly by preempting) or record why it waits; True if it started."""
        shape = (workload.gpus, workload.gpus_per_node, workload.gpu_type)
        capacity, reserver, preemptor = self.capacity, self.reserver, self.preemptor
        if not capacity.feasible(shape):
            return self._wait(
                Settled(reasons.no_matching_nodes, (shape, capacity.node_size(shape))), workload
            )
        limited = self.standing.limit_reached(workload)
        if limited is not None:
            return self._wait(
                Settled(reasons.over_limit, (limited, self.standing.tree.limit[limited])), workload
            )
        backfill = reserver.may_backfill(workload)
        placed = capacity.place(shape, backfill)
        if placed is not None and capacity.holds_back(workload, shape, placed[1]):
            node_size = capacity.node_size(shape)
            return self._wait(
                Settled(reasons.kept_for_short_work, (shape, node_size, capacity.lane)), workload
            )
        if placed is not None:
            self._start(workload, *placed)
            return True
        failed = None
        if preemptor.may_preempt(workload):
            found = self._timed("preempt", lambda: preemptor.preempt(workload, shape, backfill))
            if isinstance(found, Preempted):
                self._requeue(found.victims)
                self._start(workload, found.placement, found.on)
                return True
            failed = found
        if reserver.may_reserve(workload):
            self._timed("reserve", lambda: reserver.reserve(workload, shape))
        return self._wait(self.explainer.blocked_key(workload, shape, backfill, failed), workload)

    def _wait(self, key: OutcomeKey, workload: PendingWorkload) -> bool:
        """Record why it waits. Equal keys are made one object, so explain resolves each once."""
        self.blocked.append((workload, self.keys.setdefault(key, key)))
        return False

    def leave_untried(self, queue) -> None:  # noqa: ANN001 - a FairShareQueue or StaticQueue
        """Leave the rest of ``queue`` unexamined: one entry for the whole tail, expanded (with
        reasons from their shape and standing) only if this walk turns out to be the last one."""
        self.blocked.append((None, list(queue.remaining_groups())))

    def _start(self, workload: PendingWorkload, placement: Placement, index: FreeIndex) -> None:
        """``workload`` starts on ``placement``: protected until ``rules.protected_until``."""
        index.take(placement)
        self.started_groups.setdefault((workload.allocation, workload.user), []).append(workload)
        self.changes.took()
        funded = self.standing.funded(workload)
        protected_until = rules.protected_until(workload, funded, self.now, self.config)
        self.starts.append(Start(workload.id, placement, protected_until, funded))
        running = as_running(workload, placement, protected_until, funded, self.now)
        self.capacity.occupy(running)
        self.preemptor.started(running)
        self.standing.admit(workload)

    def _requeue(self, victims: list[RunningWorkload]) -> None:
        """A resumable victim is pending again at once, with its submit time, on the same GPU
        type: it may restart elsewhere in this very pass (a move), so the next pass has nothing
        left to cascade. If it does not restart it gets no reason (it was not pending in the
        snapshot)."""
        for victim in victims:
            if not victim.resumable:
                continue
            workload = as_pending(victim, single_type(victim, self.capacity.gpu_types))
            self.requeued[workload.id] = workload
            if self.standing.fairshare and not self.standing.funded(workload):
                self.queues[1].requeue(workload)
            else:
                self.queues[0].requeue(workload)
