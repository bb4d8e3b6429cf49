"""Invariants of a pass, over random trees, clusters and queues (hypothesis)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from scheduling.policy import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingWorkload,
    PolicyConfig,
    RunningWorkload,
    Snapshot,
    plan,
)
from scheduling.policy.placement import FreeIndex
from scheduling.policy.ranking import FairTree
from scheduling.policy.replay import after_plan, as_pending, single_type
from scheduling.policy.rules import release_at

NOW = 1_000_000.0
HOUR = 3600.0
CONFIG = PolicyConfig()
EXAMPLES = int(os.environ.get("POLICY_MAX_EXAMPLES", "100"))  # raise it locally for a deeper search
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# For properties that assume() their interesting branch: how often it is reached is checked
# explicitly (``assert_reached_often``), over all examples, instead of by hypothesis's early guess.
FILTERING = settings(SETTINGS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def budget_trees(draw):
    specs = [BudgetNodeSpec("org", None, 100.0)]
    for team in range(draw(st.integers(2, 4))):
        path = f"org/t{team}"
        specs.append(BudgetNodeSpec(path, "org", draw(st.sampled_from([0.0, 5.0, 10.0, 20.0]))))
        for project in range(draw(st.integers(0, 2))):
            budget = draw(st.sampled_from([0.0, 5.0, 10.0]))
            specs.append(BudgetNodeSpec(f"{path}/p{project}", path, budget))
    return tuple(specs)


@st.composite
def clusters(draw):
    count = draw(st.integers(1, 6))
    return tuple(
        ClusterNodeSpec(
            f"n{i}",
            draw(st.sampled_from([4, 8])),
            draw(st.sampled_from(["H100", "A100"])),
            draw(st.sampled_from(["x", "y"])),
            healthy=draw(st.integers(0, 9)) > 0,
        )
        for i in range(count)
    )


@st.composite
def snapshots(draw, running_count=st.integers(0, 8)):  # noqa: B008 - a strategy, never changed
    tree = draw(budget_trees())
    nodes = draw(clusters())
    allocations = [spec.path for spec in tree if spec.parent is not None]
    funded = FairTree(tree, {}, {}).funded
    index = FreeIndex(node for node in nodes if node.healthy)
    running = []
    for i in range(draw(running_count)):
        gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
        placement = index.place((gpus, None, None))
        if placement is None:
            continue
        index.take(placement)
        allocation = draw(st.sampled_from(allocations))
        started = NOW - draw(st.sampled_from([0.0, 600.0, 2 * HOUR, 10 * HOUR]))
        is_funded = allocation in funded and draw(st.integers(0, 5)) > 0
        min_runtime = draw(st.sampled_from([0.0, HOUR, 4 * HOUR]))
        running.append(
            RunningWorkload(
                id=1000 + i,
                allocation=allocation,
                user=draw(st.sampled_from(["alice", "bob"])),
                gpus=gpus,
                placement=placement,
                started_at=started,
                protected_until=started + min_runtime if is_funded else started,
                resumable=draw(st.booleans()),
                funded=is_funded,
                expected_end=draw(st.sampled_from([None, started + 3 * HOUR])),
                submitted_at=started - 60,
                priority=draw(st.integers(0, 2)),
            )
        )
    pending = [
        PendingWorkload(
            id=i,
            allocation=draw(st.sampled_from(allocations)),
            user=draw(st.sampled_from(["alice", "bob", "carol"])),
            gpus=draw(st.sampled_from([1, 2, 3, 4, 8, 16])),
            gpus_per_node=draw(st.sampled_from([None, None, None, 2, 4, 8])),
            submitted_at=NOW - draw(st.integers(1, 1000)),
            gpu_type=draw(st.sampled_from([None, None, "H100", "A100"])),
            min_runtime_s=draw(st.sampled_from([0.0, HOUR, 10 * HOUR])),
            resumable=draw(st.booleans()),
            max_runtime_s=draw(st.sampled_from([None, 1800.0, 5 * HOUR])),
            held=draw(st.integers(0, 9)) == 0,
            priority=draw(st.integers(0, 2)),
        )
        for i in range(1, draw(st.integers(0, 10)) + 1)
    ]
    usage = {path: draw(st.sampled_from([0.0, 1e3, 1e5, 1e7])) for path in allocations}
    return Snapshot("prop", tree, nodes, tuple(running), tuple(pending), usage)


INTERESTING_SHARE = 0.1  # a property whose interesting branch is rarer than this proves too little


def reached(counts: Counter, branch: str, hit: bool) -> None:
    """Count an example, and whether it reached ``branch`` (also a hypothesis event)."""
    counts["examples"] += 1
    counts[branch] += hit
    event(f"{branch}: {'yes' if hit else 'no'}")


def assert_reached_often(counts: Counter, branch: str) -> None:
    assert counts["examples"] and counts[branch] >= INTERESTING_SHARE * counts["examples"], counts


@st.composite
def contested(draw):
    """A snapshot whose nodes are mostly taken by the work of allocations that used much, while
    allocations that used nothing wait: where preemption (also of funded work) has work to do."""
    state = draw(snapshots(running_count=st.integers(6, 16)))
    busy = {workload.allocation for workload in state.running if workload.funded}
    return replace(state, usage={path: 1e7 if path in busy else 0.0 for path in state.usage})


def startable(state, result) -> dict[int, PendingWorkload]:
    """What a plan may start: the pending workloads and the victims it requeued (a move)."""
    workloads = {workload.id: workload for workload in state.pending}
    requeued = {p.workload_id for p in result.preemptions if p.requeue}
    types = {node.name: node.gpu_type for node in state.nodes}
    for workload in state.running:
        if workload.id in requeued:
            workloads[workload.id] = as_pending(workload, single_type(workload, types))
    return workloads


@given(snapshots())
@SETTINGS
def test_no_node_ever_exceeds_its_gpus_and_starts_use_healthy_nodes_of_the_right_type(state):
    result = plan(state, NOW, CONFIG)
    preempted = {p.workload_id for p in result.preemptions}
    used = Counter()
    for workload in state.running:
        if workload.id not in preempted:
            used.update(dict(workload.placement))
    pending = startable(state, result)
    specs = {node.name: node for node in state.nodes}
    for start in result.starts:
        used.update(dict(start.placement))
        wanted = pending[start.workload_id].gpu_type
        assert all(
            specs[name].healthy and wanted in (None, specs[name].gpu_type) for name, _ in start.placement
        )
    assert all(used[name] <= specs[name].gpus for name in used)


@given(snapshots())
@SETTINGS
def test_a_gang_starts_whole_or_not_at_all(state):
    result = plan(state, NOW, CONFIG)
    pending = startable(state, result)
    specs = {node.name: node for node in state.nodes}
    for start in result.starts:
        workload = pending[start.workload_id]
        assert sum(gpus for _, gpus in start.placement) == workload.gpus
        if workload.gpus_per_node is not None and workload.gpus_per_node < workload.gpus:
            assert all(gpus == workload.gpus_per_node for _, gpus in start.placement)
        elif len(start.placement) > 1:
            assert all(gpus == specs[name].gpus for name, gpus in start.placement)


def test_protected_funded_work_is_never_preempted():
    counts = Counter()

    @given(contested())
    @FILTERING
    def check(state):
        result = plan(state, NOW, CONFIG)
        reached(counts, "a preemption happened", bool(result.preemptions))
        assume(result.preemptions)
        running = {workload.id: workload for workload in state.running}
        for preemption in result.preemptions:
            victim = running[preemption.workload_id]
            assert not (victim.funded and victim.protected_until > NOW)
            assert preemption.requeue == victim.resumable

    check()
    assert_reached_often(counts, "a preemption happened")


def test_unfunded_work_never_preempts_funded_work():
    counts = Counter()

    @given(contested())
    @FILTERING
    def check(state):
        result = plan(state, NOW, CONFIG)
        funded = FairTree(state.tree, {}, {}).funded
        running = {workload.id: workload for workload in state.running}
        victims = [p for p in result.preemptions if running[p.workload_id].funded]
        reached(counts, "funded work was preempted", bool(victims))
        assume(victims)
        pending = startable(state, result)  # a requeued victim may preempt in turn (a cascade)
        for preemption in victims:
            assert pending[preemption.preemptor_id].allocation in funded

    check()
    assert_reached_often(counts, "funded work was preempted")


@given(snapshots())
@SETTINGS
def test_planning_the_result_again_with_unchanged_inputs_preempts_nothing(state):
    first = plan(state, NOW, CONFIG)
    again = plan(after_plan(state, first, NOW), NOW, CONFIG)
    assert again.preemptions == ()


@given(snapshots())
@SETTINGS
def test_the_same_snapshot_always_gives_the_same_plan(state):
    first, second = plan(state, NOW, CONFIG), plan(state, NOW, CONFIG)
    assert (first.starts, first.preemptions, first.reservations, first.reasons) == (
        second.starts,
        second.preemptions,
        second.reservations,
        second.reasons,
    )
    assert dict(first.fair_share) == dict(second.fair_share)


@given(snapshots(), st.sampled_from(["fairshare", "priority", "fifo"]))
@SETTINGS
def test_every_pending_workload_has_exactly_one_reason(state, ordering):
    result = plan(state, NOW, PolicyConfig(ordering=ordering))
    started = {start.workload_id for start in result.starts}
    expected = sorted(workload.id for workload in state.pending if workload.id not in started)
    assert started <= {w.id for w in state.pending} | {p.workload_id for p in result.preemptions if p.requeue}
    assert sorted(reason.workload_id for reason in result.reasons) == expected
    assert sorted(reason.position for reason in result.reasons) == list(range(1, len(expected) + 1))
    assert all(reason.message for reason in result.reasons)


def test_backfilled_work_cannot_push_back_a_reserved_large_job():
    """At the reservation's start, the reserved nodes can hold the job: work started by this plan is
    gone by then (it ends by its declared runtime) or preemptible (its protection is over)."""
    counts = Counter()

    @given(contested())
    @FILTERING
    def check(state):
        result = plan(state, NOW, CONFIG)
        reached(counts, "a reservation exists", bool(result.reservations))
        assume(result.reservations)
        (reservation,) = result.reservations
        at = reservation.start_at
        pending = startable(state, result)
        busy = Counter()
        preempted = {p.workload_id for p in result.preemptions}
        for workload in state.running:  # as the reservation saw them
            if workload.id not in preempted and release_at(workload, NOW) > at:
                busy.update(dict(workload.placement))
        for start in result.starts:
            runtime = pending[start.workload_id].max_runtime_s
            gone = min(NOW + runtime if runtime is not None else float("inf"), start.protected_until)
            if gone > at:
                busy.update(dict(start.placement))
        specs = {node.name: node for node in state.nodes}
        free = [specs[name].gpus - busy[name] for name in reservation.nodes]
        job = pending[reservation.workload_id]
        if len(reservation.nodes) == 1:
            assert free[0] >= job.gpus
        elif job.gpus_per_node is not None and job.gpus_per_node < job.gpus:
            assert all(count >= job.gpus_per_node for count in free)
        else:
            assert all(count == specs[name].gpus for count, name in zip(free, reservation.nodes, strict=True))
            assert sum(free) >= job.gpus

    check()
    assert_reached_often(counts, "a reservation exists")


@given(
    st.floats(1, 100),
    st.floats(1, 100),
    st.floats(0, 1e7),
    st.floats(0, 1e7),
    st.booleans(),
)
@SETTINGS
def test_when_only_one_of_two_fits_the_allocation_further_under_its_share_starts(
    b1, b2, u1, u2, first_is_older
):
    tree = (
        BudgetNodeSpec("org", None, 100.0),
        BudgetNodeSpec("org/a", "org", b1),
        BudgetNodeSpec("org/b", "org", b2),
    )
    older, newer = (NOW - 20, NOW - 10) if first_is_older else (NOW - 10, NOW - 20)
    queue = (PendingWorkload(1, "org/a", "alice", 8, older), PendingWorkload(2, "org/b", "bob", 8, newer))
    node = (ClusterNodeSpec("n0", 8, "H100"),)
    result = plan(Snapshot("two", tree, node, (), queue, {"org/a": u1, "org/b": u2}), NOW, CONFIG)

    def standing(budget, usage):  # LF = S / U among siblings; the common factor cancels
        return (budget / usage if usage > 0 else float("inf"), budget)

    a, b = standing(b1, u1), standing(b2, u2)
    expected = 1 if a >= b else 2  # ties: larger S, then the name ("org/a")
    assert [start.workload_id for start in result.starts] == [expected]


def test_in_the_priority_world_only_a_strictly_higher_class_preempts():
    counts = Counter()

    @given(contested())
    @FILTERING
    def check(state):
        result = plan(state, NOW, PolicyConfig(ordering="priority", contract=False))
        reached(counts, "a preemption happened", bool(result.preemptions))
        assume(result.preemptions)
        running = {workload.id: workload for workload in state.running}
        pending = startable(state, result)
        for preemption in result.preemptions:
            assert running[preemption.workload_id].priority < pending[preemption.preemptor_id].priority

    check()
    assert_reached_often(counts, "a preemption happened")


@given(snapshots())
@SETTINGS
def test_fifo_never_preempts(state):
    assert plan(state, NOW, PolicyConfig(ordering="fifo", contract=False)).preemptions == ()
