"""The discrete-event engine: the real policy's ``plan()`` on a virtual clock.

Events live in one heap ordered by (time, kind, sequence), so the same input always replays in
the same order. Passes run on the pass interval's ticks (10 s by default, like the live pass) and
only when something changed since the last one: an arrival, a completion, a preemption, a node
failure or repair, a cancelled job, or protected work becoming preemptible while work waits.
A pass's own decisions do not call for another pass: ``plan()`` starts a preemptor in the pass
that evicts its victims, and re-planning an unchanged cluster decides nothing (no flip-flop).

A non-resumable workload ended by a preemption or a node failure is resubmitted by its owner
``resubmit_delay_s`` later (None: never) with its full duration, as a new submission (its submit
time is the resubmission's); its funded demand stays owed from the end to its completion, so a
policy that throws work away cannot make its delivered/owed look better by it.

Per pass: 1. accrue the metrics up to now, 2. build the snapshot from the in-memory cluster
(usage from incremental hourly marks, never from the history of runs), 3. call ``plan()``
(handed the pending queue already grouped, kept so from change to change: pending.py),
4. apply its preemptions, then its starts, checking every placement against the cluster.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Callable, Hashable
from typing import Any

from scheduling.policy import (
    ClusterNodeSpec,
    PendingWorkload,
    Plan,
    PolicyConfig,
    Preemption,
    RunningWorkload,
    Snapshot,
    Start,
)
from scheduling.policy.planner import plan_grouped
from scheduling.policy.session import PlanningSession
from scheduling.simulator.metrics import Ledger, entitlement_fractions
from scheduling.simulator.model import NodeOutage, SimJob, SimulationError, SimulationInput
from scheduling.simulator.pending import PendingGroups
from scheduling.simulator.usage import DecayedTable, DecayedUsage, WindowedTable, WindowedUsage

Planner = Callable[[Snapshot, float, PolicyConfig], Plan]
Progress = Callable[[float], None]

# Event kinds, in the order they are handled when they share a time stamp (the pass comes last).
REPAIR, FAILURE, COMPLETION, CANCEL, ARRIVAL, RESUBMIT, WAKE, PASS = range(8)
# A researcher whose job was killed notices and submits it again about five minutes later.
DEFAULT_RESUBMIT_DELAY_S = 300.0


class JobState:
    """What happened to one workload so far (mutable; one per :class:`SimJob`)."""

    __slots__ = (
        "spec",
        "funded",
        "pending",
        "status",
        "remaining_s",
        "attempt",
        "run_start",
        "placement",
        "queued_at",
        "first_start",
        "ended_at",
        "requeue_waits",
        "preempted",
        "lost_gpu_s",
        "resubmitted_at",
        "resubmit_waits",
    )

    def __init__(self, spec: SimJob, funded: bool) -> None:
        self.spec = spec
        self.funded = funded
        self.pending = _pending_workload(spec)
        # future | pending | running | completed | cancelled | preempted | failed (ended, not
        # resubmitted) | resubmitting (ended; its owner submits it again after the delay)
        self.status = "future"
        self.remaining_s = spec.duration_s
        self.attempt = 0
        self.run_start = 0.0
        self.placement: tuple[tuple[str, int], ...] = ()
        self.queued_at = spec.submit_s
        self.first_start: float | None = None
        self.ended_at: float | None = None
        self.requeue_waits: list[float] = []
        self.preempted = 0  # times it was preempted inside the measured period
        self.lost_gpu_s = 0.0  # GPU-seconds of its work those preemptions threw away
        self.resubmitted_at: float | None = None  # the latest resubmission, until it starts
        self.resubmit_waits: list[float] = []  # resubmission -> start, per resubmission that started


def _pending_workload(spec: SimJob) -> PendingWorkload:
    return PendingWorkload(
        id=spec.id,
        allocation=spec.allocation,
        user=spec.user,
        gpus=spec.gpus,
        submitted_at=spec.submit_s,
        gpus_per_node=spec.gpus_per_node,
        gpu_type=spec.gpu_type,
        workload_class=spec.workload_class,
        min_runtime_s=spec.min_runtime_s,
        resumable=spec.resumable,
        max_runtime_s=spec.max_runtime_s,
        priority=spec.priority,
        checkpoint_interval_s=_checkpoint_interval(spec),
    )


def _checkpoint_interval(spec: SimJob) -> float | None:
    """How often the policy may count on ``spec`` saving its progress (None: continuously, or never)."""
    return spec.checkpoint_s if spec.resumable and spec.checkpoint_s > 0 else None


class Engine:
    """One simulation run. Use :func:`scheduling.simulator.run_simulation` rather than this."""

    def __init__(
        self,
        inputs: SimulationInput,
        config: PolicyConfig,
        planner: Planner | None,
        *,
        pass_interval_s: float = 10.0,
        progress: Progress | None = None,
        resubmit_delay_s: float | None = DEFAULT_RESUBMIT_DELAY_S,
    ) -> None:
        # None: the real policy, handed the pending queue grouped here (see _plan)
        self.inputs, self.config, self.planner = inputs, config, planner
        self.pass_interval_s = pass_interval_s
        self.resubmit_delay_s = resubmit_delay_s  # None: ended work is not resubmitted
        self.progress = progress
        self.horizon = inputs.horizon_s
        self.budgets = {spec.path: spec.budget for spec in inputs.tree}
        self.jobs = {
            spec.id: JobState(spec, self.budgets.get(spec.allocation, 0.0) > 0) for spec in inputs.jobs
        }
        self.node_specs = {node.name: node for node in inputs.cluster_nodes}
        self.free = {node.name: node.gpus for node in inputs.cluster_nodes}
        self.on_node: dict[str, set[int]] = {node.name: set() for node in inputs.cluster_nodes}
        self.pending: dict[int, PendingWorkload] = {}
        self.queue = PendingGroups()  # self.pending as the policy groups it
        self.running: dict[int, RunningWorkload] = {}
        # The snapshot's tuples of self.running and self.pending, kept until either changes
        # (None: build anew at the next pass).
        self.running_tuple: tuple[RunningWorkload, ...] | None = None
        self.pending_tuple: tuple[PendingWorkload, ...] | None = None
        self.pending_users: dict[tuple[str, str], int] = {}
        self.funded_pending = 0
        self.allocation_rates: dict[str, int] = {}
        self.user_rates: dict[tuple[str, str], int] = {}
        self.usage = (
            DecayedUsage(config.half_life_s) if config.half_life_s else WindowedUsage(config.window_s)
        )
        # What the snapshot reads, kept in the order of allocation_rates and pending_users: the
        # tables recompute only the usage that can have moved since the last pass.
        self.allocation_usage: WindowedTable[str] | DecayedTable[str] = self.usage.table()
        self.user_usage: WindowedTable[tuple[str, str]] | DecayedTable[tuple[str, str]] = self.usage.table()
        fractions = entitlement_fractions(inputs.tree, inputs.gpus)
        self.ledger = Ledger(inputs.gpus, inputs.warmup_s, self.horizon, fractions)
        self.ledger.healthy_gpus = float(sum(node.gpus for node in inputs.cluster_nodes if node.healthy))
        self.counters = {"preemptions": 0, "requeues": 0, "lost_gpu_s": 0.0, "node_failures": 0}
        self.counters.update({"node_failure_lost_gpu_s": 0.0, "node_failure_ends": 0, "passes": 0})
        # completions and resubmissions inside the measured period; the GPU-seconds of lost work
        # that lie inside it (goodput = GPU-seconds run there minus these)
        self.counters.update({"completions": 0, "resubmissions": 0, "lost_in_period_gpu_s": 0.0})
        self.counters["funded_completions"] = 0  # of the completions, funded work's
        self.plan_seconds: list[float] = []
        self.now = 0.0
        self.events: list[tuple] = []  # (time, kind, sequence, payload), a heap
        self.arrivals: list[tuple] = []  # the same, for every arrival, sorted (_schedule_inputs)
        self.sequence = 0
        self.dirty = False
        self.applying = False
        self.next_pass: float | None = None
        self.last_pass_at = -math.inf
        self.node_tuple: tuple[ClusterNodeSpec, ...] = inputs.cluster_nodes
        # What the policy carries from pass to pass (the filing of the running work, orders, memos)
        self.session = PlanningSession()

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> None:
        self._schedule_inputs()
        handlers: dict[int, Callable[[Any], None]] = {
            REPAIR: self._on_repair,
            FAILURE: self._on_failure,
            COMPLETION: self._on_completion,
            CANCEL: self._on_cancel,
            ARRIVAL: self._on_arrival,
            RESUBMIT: self._on_resubmit,
            WAKE: self._on_wake,
            PASS: self._on_pass,
        }
        next_report = 0.0
        events, arrivals, horizon, pop = self.events, self.arrivals, self.horizon, heapq.heappop
        arrived = 0
        while True:  # the heap's events and the arrivals, merged in (time, kind, sequence) order
            following = arrivals[arrived]
            if events and events[0] < following:
                moment, kind, _, payload = pop(events)
            else:
                moment, kind, _, payload = following
                arrived += 1
            if moment > horizon:  # the arrivals end with a sentinel after the horizon
                break
            self.now = moment
            handlers[kind](payload)
            if self.progress and moment >= next_report:
                self.progress(moment / self.horizon)
                next_report = moment + self.horizon / 200
        self.now = self.horizon
        self.ledger.accrue(self.horizon)

    def _schedule_inputs(self) -> None:
        """Arrivals, all known up front, wait in one sorted list beside the heap (which so stays
        small); they take their sequence numbers as if pushed, so the merged order is the same."""
        arrivals: list[tuple[float, int, float, JobState | None]] = []
        for state in self.jobs.values():
            if state.spec.submit_s <= self.horizon:
                self.sequence += 1
                arrivals.append((state.spec.submit_s, ARRIVAL, self.sequence, state))
        arrivals.sort()
        arrivals.append((math.inf, ARRIVAL, math.inf, None))
        self.arrivals = arrivals
        for outage in self.inputs.outages:
            self._push(outage.at_s, FAILURE, outage)

    def _push(self, moment: float, kind: int, payload: object) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (moment, kind, self.sequence, payload))

    def _changed(self) -> None:
        """Something the policy sees changed: make sure a pass runs on the next tick.

        The pass's own decisions are not news to it, so applying a plan changes nothing here.
        """
        if self.applying:
            return
        self.dirty = True
        if self.next_pass is None:
            tick = math.ceil(self.now / self.pass_interval_s) * self.pass_interval_s
            if tick <= self.last_pass_at:
                tick = self.last_pass_at + self.pass_interval_s
            self.next_pass = tick
            self._push(tick, PASS, None)

    # -- events ---------------------------------------------------------------------------------

    def _on_arrival(self, state: JobState) -> None:
        spec = state.spec
        self.ledger.accrue(self.now)
        self._set_demand(state, +1)
        self._enqueue(state)
        if spec.patience_s is not None:
            self._push(spec.submit_s + spec.patience_s, CANCEL, state)

    def _on_completion(self, payload: tuple[JobState, int]) -> None:
        state, attempt = payload
        if state.status != "running" or state.attempt != attempt:
            return  # a stale completion of a run that was preempted or failed
        self.ledger.accrue(self.now)
        self._stop(state)
        measured = self._measured()
        self.counters["completions"] += measured
        self.counters["funded_completions"] += measured if state.funded else 0
        self._end(state, "completed")

    def _on_cancel(self, state: JobState) -> None:
        if state.status != "pending" or state.first_start is not None:
            return
        self.ledger.accrue(self.now)
        self._dequeue(state)
        self._end(state, "cancelled")

    def _on_resubmit(self, state: JobState) -> None:
        """The owner submits ended work again: all of its duration, a new submit time."""
        self.ledger.accrue(self.now)
        state.remaining_s = state.spec.duration_s
        state.queued_at = state.resubmitted_at = self.now
        state.pending = dataclasses.replace(state.pending, submitted_at=self.now)
        self.ledger.requested += state.spec.gpus  # pending again (its funded demand never left)
        self.counters["resubmissions"] += self._measured()
        self._enqueue(state)

    def _on_failure(self, outage: NodeOutage) -> None:
        spec = self.node_specs[outage.node]
        if not spec.healthy:
            return
        self.ledger.accrue(self.now)
        self._set_health(outage.node, healthy=False)
        self._push(self.now + outage.repair_s, REPAIR, outage.node)
        self.counters["node_failures"] += self._measured()
        for workload_id in sorted(self.on_node[outage.node]):
            self._interrupt(self.jobs[workload_id], requeue=True, cause="node_failure")

    def _on_repair(self, node: str) -> None:
        if self.node_specs[node].healthy:
            return
        self.ledger.accrue(self.now)
        self._set_health(node, healthy=True)

    def _on_wake(self, _: object) -> None:
        """Protected work just became preemptible: news only to funded work that waits."""
        if self.funded_pending:
            self._changed()

    def _on_pass(self, _: object) -> None:
        self.next_pass = None
        if not self.dirty:
            return
        self.dirty, self.last_pass_at = False, self.now
        self.ledger.accrue(self.now)
        result = self._plan(self._snapshot())
        self.counters["passes"] += 1
        self.applying = True
        try:
            self._apply(result)
        finally:
            self.applying = False

    def _plan(self, snapshot: Snapshot) -> Plan:
        """One pass of the planner, timed. The real policy (no planner given) is handed the
        pending queue already grouped, as ``group_pending(snapshot.pending)`` would group it."""
        if self.planner is None:
            grouped = self.queue.grouped()
            began = time.perf_counter()
            result = plan_grouped(
                snapshot, self.now, self.config, grouped, session=self.session, explain=False
            )
        else:
            began = time.perf_counter()
            result = self.planner(snapshot, self.now, self.config)
        self.plan_seconds.append(time.perf_counter() - began)
        return result

    # -- applying a plan ------------------------------------------------------------------------

    def _apply(self, result: Plan) -> None:
        for preemption in result.preemptions:
            self._apply_preemption(preemption)
        for start in result.starts:
            self._apply_start(start)

    def _apply_preemption(self, preemption: Preemption) -> None:
        state = self.jobs.get(preemption.workload_id)
        if state is None or state.status != "running":
            raise SimulationError(
                f"t={self.now:.0f}: the plan preempts workload {preemption.workload_id}, which is not running"
            )
        measured = self._measured()
        self.counters["preemptions"] += measured
        state.preempted += measured
        lost = self._interrupt(state, requeue=preemption.requeue, cause="preempted")
        self.counters["lost_gpu_s"] += lost * measured
        state.lost_gpu_s += lost * measured

    def _apply_start(self, start: Start) -> None:
        state = self.jobs.get(start.workload_id)
        if state is None or state.status != "pending":
            raise SimulationError(
                f"t={self.now:.0f}: the plan starts workload {start.workload_id}, which is not pending"
            )
        self._check_placement(state.spec, start.placement)
        self._dequeue(state)
        self._occupy(state, start.placement)
        state.status, state.run_start, state.attempt = "running", self.now, state.attempt + 1
        self._record_start(state)
        self.running[state.spec.id] = self._running_workload(state, start)
        self.running_tuple = None
        self._push(self.now + state.remaining_s, COMPLETION, (state, state.attempt))
        if self.now < start.protected_until < self.now + state.remaining_s:
            self._push(start.protected_until, WAKE, None)  # it becomes preemptible before it ends

    def _check_placement(self, spec: SimJob, placement: tuple[tuple[str, int], ...]) -> None:
        total = 0
        for node, gpus in placement:
            node_spec = self.node_specs.get(node)
            if node_spec is None or not node_spec.healthy or self.free[node] < gpus or gpus <= 0:
                raise SimulationError(
                    f"t={self.now:.0f}: the plan places workload {spec.id} on {node} x{gpus}, "
                    f"which has {self.free.get(node, 0)} free GPUs (healthy: {bool(node_spec and node_spec.healthy)})"
                )
            total += gpus
        if total != spec.gpus:
            raise SimulationError(
                f"t={self.now:.0f}: workload {spec.id} needs {spec.gpus} GPUs, placed on {total}"
            )

    def _running_workload(self, state: JobState, start: Start) -> RunningWorkload:
        spec = state.spec
        max_runtime = spec.max_runtime_s
        return RunningWorkload(
            id=spec.id,
            allocation=spec.allocation,
            user=spec.user,
            gpus=spec.gpus,
            placement=start.placement,
            started_at=self.now,
            protected_until=start.protected_until,
            resumable=spec.resumable,
            funded=start.funded,  # the plan's own verdict, as the live pass records it
            workload_class=spec.workload_class,
            expected_end=None if max_runtime is None else self.now + max_runtime,
            submitted_at=state.pending.submitted_at,  # a resubmission's own submit time
            priority=spec.priority,
            checkpoint_interval_s=_checkpoint_interval(spec),
        )

    def _record_start(self, state: JobState) -> None:
        if state.first_start is None:
            state.first_start = self.now
        elif state.resubmitted_at is not None:
            state.resubmit_waits.append(self.now - state.resubmitted_at)
            state.resubmitted_at = None
        else:
            state.requeue_waits.append(self.now - state.queued_at)

    # -- state changes --------------------------------------------------------------------------

    def _interrupt(self, state: JobState, *, requeue: bool, cause: str) -> float:
        """Stop a running workload early; returns the GPU-seconds of work it lost."""
        spec = state.spec
        self.ledger.accrue(self.now)
        elapsed = self.now - state.run_start
        self._stop(state)
        ended, saved = not (spec.resumable and requeue), 0.0
        if not ended:
            saved = elapsed if spec.checkpoint_s <= 0 else (elapsed // spec.checkpoint_s) * spec.checkpoint_s
            state.remaining_s -= saved
            state.queued_at = self.now
            self.counters["requeues"] += self._measured()
            self._enqueue(state)
        elif self.resubmit_delay_s is None:
            self._end(state, "failed" if cause == "node_failure" else "preempted")
        else:
            self._await_resubmission(state)
        lost = (elapsed - saved) * spec.gpus
        self._count_lost_in_period(elapsed - saved, spec.gpus)
        if cause == "node_failure":
            self.counters["node_failure_lost_gpu_s"] += lost * self._measured()
            self.counters["node_failure_ends"] += ended * self._measured()
        return lost

    def _await_resubmission(self, state: JobState) -> None:
        """Ended work its owner will submit again: no longer pending or running (not requested),
        but its funded demand stays owed until it completes."""
        state.status = "resubmitting"
        self.ledger.requested -= state.spec.gpus
        self._push(self.now + (self.resubmit_delay_s or 0.0), RESUBMIT, state)

    def _count_lost_in_period(self, lost_s: float, gpus: int) -> None:
        """The lost work is the run's last ``lost_s`` seconds: count its part inside the measured
        period (the goodput's deduction; the run's earlier part, if any, was kept)."""
        start = max(self.now - lost_s, self.inputs.warmup_s)
        if self.now > start:
            self.counters["lost_in_period_gpu_s"] += (self.now - start) * gpus

    def _enqueue(self, state: JobState) -> None:
        state.status = "pending"
        self.funded_pending += state.funded
        self.pending[state.spec.id] = state.pending
        self.pending_tuple = None
        self.queue.add(state.pending)
        key = (state.spec.allocation, state.spec.user)
        queued = self.pending_users.get(key, 0)
        if not queued:
            self.user_usage.add(key)
        self.pending_users[key] = queued + 1
        self._changed()

    def _dequeue(self, state: JobState) -> None:
        del self.pending[state.spec.id]
        self.pending_tuple = None
        self.queue.remove(state.pending)
        self.funded_pending -= state.funded
        key = (state.spec.allocation, state.spec.user)
        self.pending_users[key] -= 1
        if not self.pending_users[key]:
            del self.pending_users[key]
            self.user_usage.remove(key)

    def _end(self, state: JobState, status: str) -> None:
        state.status, state.ended_at = status, self.now
        self._set_demand(state, -1)
        self._changed()

    def _set_demand(self, state: JobState, sign: int) -> None:
        gpus = state.spec.gpus * sign
        self.ledger.requested += gpus
        if state.funded:
            self.ledger.add_demand(state.spec.allocation, gpus)

    def _occupy(self, state: JobState, placement: tuple[tuple[str, int], ...]) -> None:
        state.placement = placement
        for node, gpus in placement:
            self.free[node] -= gpus
            self.on_node[node].add(state.spec.id)
        self._charge(state, +1)

    def _stop(self, state: JobState) -> None:
        for node, gpus in state.placement:
            self.free[node] += gpus
            self.on_node[node].discard(state.spec.id)
        state.placement = ()
        del self.running[state.spec.id]
        self.running_tuple = None
        self._charge(state, -1)
        self._changed()

    def _charge(self, state: JobState, sign: int) -> None:
        """Start (+1) or stop (-1) charging a workload's GPUs to usage and the ledger."""
        spec, ledger = state.spec, self.ledger
        gpus = spec.gpus * sign
        ledger.busy += gpus * spec.busy
        if state.funded:
            ledger.assigned_funded += gpus
            ledger.add_running(spec.allocation, gpus)
        else:
            ledger.assigned_unfunded += gpus
        if spec.allocation not in self.allocation_rates:
            self.allocation_usage.add(spec.allocation)
        by_key: tuple[tuple[dict[Any, int], Hashable], ...] = (  # rates by path, by (path, user)
            (self.allocation_rates, spec.allocation),
            (self.user_rates, (spec.allocation, spec.user)),
        )
        for rates, key in by_key:
            rates[key] = rates.get(key, 0) + gpus
            self.usage.set_rate(key, self.now, rates[key])

    def _set_health(self, node: str, *, healthy: bool) -> None:
        spec = self.node_specs[node]
        new = ClusterNodeSpec(spec.name, spec.gpus, spec.gpu_type, spec.domain, healthy)
        self.node_specs[node] = new
        self.node_tuple = tuple(self.node_specs.values())
        self.ledger.healthy_gpus += spec.gpus if healthy else -spec.gpus
        self._changed()

    def _measured(self) -> int:
        return int(self.now >= self.inputs.warmup_s)

    # -- the snapshot ---------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        now = self.now
        if self.running_tuple is None:
            self.running_tuple = tuple(self.running.values())
        if self.pending_tuple is None:
            self.pending_tuple = tuple(self.pending.values())
        return Snapshot(
            cluster=self.inputs.name,
            tree=self.inputs.tree,
            nodes=self.node_tuple,
            running=self.running_tuple,
            pending=self.pending_tuple,
            usage=self.allocation_usage.read(now),
            user_usage=self.user_usage.read(now),
        )
