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
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import cast

from scheduling.policy import reasons, rules
from scheduling.policy.clearable import ClearableNodes
from scheduling.policy.explaining import Explaining
from scheduling.policy.inventory import file_afresh, fits_inventory, node_facts
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preempting import Preempting
from scheduling.policy.queues import (
    FairShareQueue,
    Grouped,
    StaticQueue,
    group_pending,
    priority_key,
    submit_key,
)
from scheduling.policy.ranking import FairTree
from scheduling.policy.replay import as_running
from scheduling.policy.reservation import INFINITE, ReleaseProfile
from scheduling.policy.rules import may_backfill
from scheduling.policy.session import PlanningSession
from scheduling.policy.shortcuts import Shortcuts
from scheduling.policy.types import (
    PendingWorkload,
    Placement,
    Plan,
    PolicyConfig,
    Preemption,
    Reservation,
    RunningWorkload,
    Snapshot,
    Start,
)
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


class _Pass(Shortcuts, Preempting, Explaining):
    """The mutable state of one pass; ``run`` is the only entry."""

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
        self.fairshare = config.ordering == "fairshare"
        self.charge_s = config.projected_charge_s if self.fairshare else 0.0
        self.timings: dict[str, float] = {}
        self.starts: list[Start] = []
        self.preemptions: list[Preemption] = []
        self.reservation: Reservation | None = None
        self.reserved_workload: PendingWorkload | None = None
        # walk order, with an outcome key (or None and an untried tail: Shortcuts._leave_untried)
        self.blocked: list[tuple[PendingWorkload, tuple] | tuple[None, list]] = []
        self.outcomes: dict[tuple, reasons.Outcome] = {}
        self.no_fit: set[Shape] = set()
        self.no_fit_reserved: set[Shape] = set()
        self.no_preempt: dict[tuple, tuple | None] = {}
        self.feasible: dict[Shape, bool] = {}
        self.fit_at_start: dict[Shape, bool] = {}
        self.generation = 0  # bumped whenever capacity, standing or the reservation changes
        self.relief = 0  # bumped when GPUs may come free or the reservation changes (not on a start)
        self.pools: dict[tuple, tuple[int, object]] = {}  # victim orders and pools, per generation
        self.profile: ReleaseProfile | None = None
        self.touched: set[str] = set()  # nodes whose occupants changed since the profile was built
        self.requeued: set[int] = set()  # preempted in this pass, back in the queue
        self.requeued_work: dict[int, PendingWorkload] = {}
        self.started_groups: dict[
            tuple[str, str], list[PendingWorkload]
        ] = {}  # (allocation, user) -> started
        self.keys: dict[tuple, tuple] = {}  # outcome keys, interned
        self.preemptible: tuple | None = None  # (relief, what _preemptible found then)
        # Every workload the last walk tried before its last start started: the walk from that
        # start on saw the state a settling walk would start from, in the order it would see it.
        self.tail_repeats = False

    # -- phases --------------------------------------------------------------------------------
    def run(self) -> Plan:
        self._timed("rank", self._rank)
        self._timed("index", self._index)
        self._timed("admit", self._admit)
        self.timings["admit"] -= self.timings.get("preempt", 0.0) + self.timings.get("reserve", 0.0)
        if self.explain is True:
            explained = self._timed("explain", self._explain)
        elif self.explain is False:
            explained = reasons.Reasons([], [])
        else:
            explained = self._timed(
                "explain", lambda: self._explain_only(cast("frozenset[int]", self.explain))
            )
        return Plan(
            starts=tuple(self.starts),
            preemptions=tuple(self.preemptions),
            reservations=(self.reservation,) if self.reservation else (),
            reasons=explained,
            fair_share=MappingProxyType(self.tree.base_ratio),
            timings_ms=MappingProxyType({k: round(v * 1000.0, 3) for k, v in self.timings.items()}),
        )

    def _timed(self, phase: str, step: Callable):
        started = time.perf_counter()
        try:
            return step()
        finally:
            self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - started

    def _rank(self) -> None:
        snapshot = self.snapshot
        groups, self.held = self.grouped or group_pending(snapshot.pending)
        self.groups = groups
        allocations = set(map(_FIRST, groups))  # every allocation met, for those the tree lacks
        carry = self.session.filing
        allocations.update(carry.allocations(snapshot.running), map(_ALLOCATION, self.held))
        self.tree = FairTree(
            snapshot.tree, snapshot.usage, snapshot.user_usage, allocations, self.session.tree_shapes
        )
        if self.fairshare:
            self.tree.charge_running(snapshot.running, self.now, self.charge_s, carry.in_start_order)
        self.queues = self._make_queues(groups)

    def _make_queues(self, groups: dict[tuple[str, str], list[PendingWorkload]]) -> list:
        """Funded work first, then unfunded (fair share); or one static order."""
        if self.fairshare:
            return FairShareQueue.funded_and_unfunded(self.tree, groups)
        key = priority_key if self.config.ordering == "priority" else submit_key
        return [StaticQueue((w for queue in groups.values() for w in queue), key)]

    def _index(self) -> None:
        """File the running work onto nodes, candidates and limits: carried over from the pass
        before when the caller passes the same running objects again (filing.py), else afresh."""
        snapshot, tree = self.snapshot, self.tree
        healthy, capacity, self.sizes, self.gpu_types = node_facts(snapshot.nodes, self.session)
        self.reserved = FreeIndex()
        self.unshielded: dict[str, list[RunningWorkload]] = {}  # see Preempting._unshielded
        self.node_needs: dict[str, frozenset | None] | None = None  # see Preempting._node_needs
        self.evicted_nodes: set[str] = set()  # see Preempting._kept_node_needs
        filed = self.session.filing.filed(
            snapshot.running, snapshot.nodes, healthy, capacity, tree.ancestors, tree.limit, self.now
        )
        if filed is None:
            filed = file_afresh(snapshot.running, healthy, capacity, tree.ancestors, tree.limit, self.now)
        (
            self.occupants,
            self.candidates,
            self.used,
            self.index,
            self.start_index,
            self.release_keys,
            self.kept_needs,
            self.candidates_ordered,  # see Preempting._in_order
        ) = filed
        self.ordered_keys: set[tuple[str, bool]] = set()  # candidates put in order (_in_order)
        self.clearable = ClearableNodes(self.session, snapshot.nodes, self.index)

    # -- admit ---------------------------------------------------------------------------------
    def _admit(self) -> None:
        """Walk the order; then, while a walk changed anything, walk what is still pending again,
        in the standing the last walk ended with and with a fresh reservation (at most ``_WALKS``).

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
        self._walk(self.queues, settle)
        for walk in range(2, _WALKS + 1 if settle else 0):
            after = (len(self.starts), len(self.preemptions))
            if after == before:
                break
            if self.tail_repeats and self.explain is False:
                break  # another walk would only repeat what followed this one's last start
            before = after
            self._walk(self._queues_again(), walk < _WALKS)

    def _queues_again(self) -> list:
        """Everything still pending (``walk.still_pending``), for a settling walk that starts
        afresh: nothing blocked, nothing reserved, nothing known not to fit."""
        started = {start.workload_id for start in self.starts}
        groups = still_pending(self.groups, self.started_groups, self.requeued_work.values(), started)
        self.blocked = []
        self._release_reservation()
        self.no_fit.clear()
        self.no_fit_reserved.clear()
        self.no_preempt.clear()
        self.generation += 1
        self.relief += 1
        return self._make_queues(groups)

    def _walk(self, queues: list, settles: bool) -> None:
        """One walk over ``queues`` (walk.py)."""
        Walk(self, queues, settles).run()

    def _consider(self, workload: PendingWorkload) -> bool:
        """Start ``workload`` (possibly by preempting) or record why it waits; True if it started."""
        shape = (workload.gpus, workload.gpus_per_node, workload.gpu_type)
        if not self._feasible(shape):
            return self._wait(workload, ("none", shape))
        limited = self._limit_reached(workload)
        if limited is not None:
            return self._wait(workload, ("limit", limited))
        backfill = self._may_backfill(workload)
        placed = self._place(shape, backfill)
        if placed is not None:
            self._start(workload, *placed)
            return True
        protected = None
        if self._may_preempt(workload):
            done, protected = self._timed("preempt", lambda: self._preempt(workload, shape, backfill))
            if done:
                return True
        if self.reservation is None and self.config.reservation and self._may_preempt_or_fifo(workload):
            self._timed("reserve", lambda: self._reserve(workload, shape))
        return self._wait(workload, self._blocked_key(workload, shape, backfill, protected))

    def _wait(self, workload: PendingWorkload, key: tuple) -> bool:
        """Record why it waits. Equal keys are made one object, so explain resolves each once."""
        self.blocked.append((workload, self.keys.setdefault(key, key)))
        return False

    def _feasible(self, shape: Shape) -> bool:
        known = self.feasible.get(shape)
        if known is None:
            known = self.feasible[shape] = fits_inventory(shape, self.sizes)
        return known

    def _limit_reached(self, workload: PendingWorkload) -> str | None:
        if not self.used:  # no concurrency limits anywhere
            return None
        for path in self.tree.ancestors.get(workload.allocation, ()):
            limit = self.tree.limit.get(path)
            if limit is not None and self.used[path] + workload.gpus > limit:
                return path
        return None

    def _funded(self, workload: PendingWorkload | RunningWorkload) -> bool:
        return workload.allocation in self.tree.funded

    def _reservation_start(self) -> float:
        """When the reserved job starts: -inf with no reservation (nothing to protect yet)."""
        if self.reservation is None:
            return -INFINITE
        return self.reservation.start_at if self.reservation.start_at is not None else INFINITE

    def _may_backfill(self, workload: PendingWorkload) -> bool:
        return may_backfill(workload, self._funded(workload), self.reservation, self.now, self.config)

    def _place(self, shape: Shape, backfill: bool) -> tuple[Placement, FreeIndex] | None:
        """On unreserved nodes, else on reserved ones if it may backfill them; a shape that did
        not fit is not tried again until GPUs come free (``no_fit``, cleared by an eviction)."""
        if shape not in self.no_fit:
            placement = self.index.place(shape)
            if placement is not None:
                return placement, self.index
            self.no_fit.add(shape)
        if backfill and shape not in self.no_fit_reserved:
            placement = self.reserved.place(shape)
            if placement is not None:
                return placement, self.reserved
            self.no_fit_reserved.add(shape)
        return None

    def _start(self, workload: PendingWorkload, placement: Placement, index: FreeIndex) -> None:
        index.take(placement)
        self.started_groups.setdefault((workload.allocation, workload.user), []).append(workload)
        self.generation += 1
        funded = self._funded(workload)
        protected_until = rules.protected_until(workload, funded, self.now, self.config)
        self.starts.append(Start(workload.id, placement, protected_until, funded))
        self._occupy_new(as_running(workload, placement, protected_until, funded, self.now))
        if self.charge_s:
            self.tree.charge(workload.allocation, workload.user, workload.gpus * self.charge_s)

    def _occupy_new(self, workload: RunningWorkload) -> None:
        needs, occupants = self.node_needs, self.occupants
        for name, _ in workload.placement:
            here = occupants.get(name)
            # a node's list may be the carried filing's own (filing.py): changed only in a copy
            occupants[name] = [workload] if here is None else [*here, workload]
            self.touched.add(name)
            if needs is not None:
                needs[name] = None  # work started now is never preempted in this pass
        self.clearable.recount([name for name, _ in workload.placement])
        for path in self.tree.ancestors.get(workload.allocation, ()):
            if path in self.used:
                self.used[path] += workload.gpus
