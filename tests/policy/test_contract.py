"""The scheduling contract and preemption (DESIGN 5 step 5)."""

import pytest

from scheduling.policy import PolicyConfig, ReasonCode, plan
from tests.policy.builders import HOUR, NOW, nodes, pending, reason_of, running, snapshot, tree

TREE = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 10), ("org/free", "org", 0))
UNDER_A = {"org/a": 1e5, "org/b": 1e7}  # a is far below its share, b far above (beyond one projected charge)


def test_a_started_workload_is_protected_for_its_minimum_runtime_capped():
    state = snapshot(
        TREE,
        nodes(2),
        queue=[
            pending(1, "org/a", 8, min_runtime_s=2 * HOUR),
            pending(2, "org/a", 8, min_runtime_s=99 * HOUR),
        ],
    )
    result = plan(state, NOW, PolicyConfig(min_runtime_cap_s=8 * HOUR))
    protected = {start.workload_id: start.protected_until for start in result.starts}
    assert protected == {1: NOW + 2 * HOUR, 2: NOW + 8 * HOUR}


def test_unfunded_work_is_never_protected():
    state = snapshot(TREE, nodes(1), queue=[pending(1, "org/free", 8, min_runtime_s=2 * HOUR)])
    (start,) = plan(state, NOW, PolicyConfig()).starts
    assert start.protected_until == NOW
    assert start.funded is False


def test_an_under_served_allocation_preempts_unprotected_work_of_an_over_served_one():
    state = snapshot(
        TREE,
        nodes(1),
        run=[running(10, "org/b", {"n0": 8}, resumable=True)],
        queue=[pending(1, "org/a", 8)],
        usage=UNDER_A,
    )
    result = plan(state, NOW, PolicyConfig())
    assert [(p.workload_id, p.requeue, p.preemptor_id) for p in result.preemptions] == [(10, True, 1)]
    assert [start.workload_id for start in result.starts] == [1]


def test_non_resumable_victims_end_instead_of_requeueing():
    state = snapshot(
        TREE,
        nodes(1),
        run=[running(10, "org/b", {"n0": 8}, resumable=False)],
        queue=[pending(1, "org/a", 8)],
        usage=UNDER_A,
    )
    (preemption,) = plan(state, NOW, PolicyConfig()).preemptions
    assert preemption.requeue is False


def test_protected_work_is_not_preempted_and_the_reason_says_until_when():
    until = NOW + HOUR
    state = snapshot(
        TREE,
        nodes(1),
        run=[running(10, "org/b", {"n0": 8}, protected_until=until)],
        queue=[pending(1, "org/a", 8)],
        usage=UNDER_A,
    )
    result = plan(state, NOW, PolicyConfig())
    assert result.preemptions == ()
    reason = reason_of(result, 1)
    assert reason.code == ReasonCode.PROTECTED_WORK
    assert reason.estimated_start == until


def test_no_flip_flop_work_of_a_more_under_served_allocation_is_not_preempted():
    usage = {"org/a": 1e7, "org/b": 1e5}  # b (the running one) is the under-served one
    state = snapshot(
        TREE, nodes(1), run=[running(10, "org/b", {"n0": 8})], queue=[pending(1, "org/a", 8)], usage=usage
    )
    assert plan(state, NOW, PolicyConfig()).preemptions == ()


def test_unfunded_work_never_preempts_funded_work():
    usage = {"org/b": 1e9}
    state = snapshot(
        TREE, nodes(1), run=[running(10, "org/b", {"n0": 8})], queue=[pending(1, "org/free", 8)], usage=usage
    )
    result = plan(state, NOW, PolicyConfig())
    assert result.preemptions == ()
    assert reason_of(result, 1).code == ReasonCode.UNFUNDED


def test_unfunded_victims_go_first_even_when_funded_work_is_over_served():
    state = snapshot(
        TREE,
        nodes(2),
        run=[running(10, "org/b", {"n0": 8}), running(11, "org/free", {"n1": 8}, funded=False)],
        queue=[pending(1, "org/a", 8)],
        usage=UNDER_A,
    )
    assert [p.workload_id for p in plan(state, NOW, PolicyConfig()).preemptions] == [11]


def test_resumable_victims_go_before_non_resumable_ones():
    state = snapshot(
        TREE,
        nodes(2),
        run=[
            running(10, "org/b", {"n0": 8}, resumable=False),
            running(11, "org/b", {"n1": 8}, resumable=True),
        ],
        queue=[pending(1, "org/a", 8)],
        usage=UNDER_A,
    )
    assert [p.workload_id for p in plan(state, NOW, PolicyConfig()).preemptions] == [11]


def test_the_smallest_set_that_frees_a_placement_is_preempted():
    run = [
        running(10, "org/b", {"n0": 2}),
        running(11, "org/b", {"n0": 2}),
        running(12, "org/b", {"n0": 4}),
    ]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/a", 4)], usage=UNDER_A)
    preempted = [p.workload_id for p in plan(state, NOW, PolicyConfig()).preemptions]
    assert sum(run_.gpus for run_ in run if run_.id in preempted) == 4
    assert len(preempted) <= 2


def test_a_gang_preempts_whole_nodes_in_one_domain():
    cluster = nodes(2, domain="x", prefix="x") + nodes(2, domain="y", prefix="y")
    run = [running(10 + i, "org/b", {node.name: 8}) for i, node in enumerate(cluster)]
    state = snapshot(TREE, cluster, run=run, queue=[pending(1, "org/a", 16)], usage=UNDER_A)
    result = plan(state, NOW, PolicyConfig())
    (start,) = result.starts
    assert {name[0] for name, _ in start.placement} in ({"x"}, {"y"})
    assert len(result.preemptions) == 2


def test_work_that_starts_at_this_very_moment_is_never_a_victim():
    state = snapshot(
        TREE,
        nodes(1),
        run=[running(10, "org/b", {"n0": 8}, started_at=NOW)],
        queue=[pending(1, "org/a", 8)],
        usage=UNDER_A,
    )
    assert plan(state, NOW, PolicyConfig()).preemptions == ()


@pytest.mark.parametrize(
    ("config", "preempted"),
    [
        pytest.param(PolicyConfig(preemption=False), [], id="preemption switched off"),
        pytest.param(PolicyConfig(ordering="fifo", contract=False), [], id="fifo never preempts"),
        pytest.param(
            PolicyConfig(ordering="priority", contract=False),
            [10],
            id="priority: a strictly higher class preempts",
        ),
    ],
)
def test_preemption_by_ordering(config, preempted):
    run = [running(10, "org/b", {"n0": 8}, priority=1, protected_until=NOW + HOUR)]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/a", 8, priority=2)], usage=UNDER_A)
    assert [p.workload_id for p in plan(state, NOW, config).preemptions] == preempted


def test_priority_ordering_does_not_preempt_an_equal_class():
    run = [running(10, "org/b", {"n0": 8}, priority=2)]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/a", 8, priority=2)])
    assert plan(state, NOW, PolicyConfig(ordering="priority", contract=False)).preemptions == ()


def test_a_gang_that_names_the_node_size_as_its_gpus_per_node_preempts_whole_nodes_too():
    run = [running(10 + i, "org/b", {node.name: 8}) for i, node in enumerate(nodes(2))]
    state = snapshot(TREE, nodes(2), run=run, queue=[pending(1, "org/a", 16, gpus_per_node=8)], usage=UNDER_A)
    result = plan(state, NOW, PolicyConfig())
    assert [start.placement for start in result.starts] == [(("n0", 8), ("n1", 8))]
    assert sorted(p.workload_id for p in result.preemptions) == [10, 11]


def test_priority_ordering_does_not_preempt_unfunded_work_of_an_equal_class():
    run = [running(10, "org/free", {"n0": 8}, funded=False, priority=2)]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/a", 8, priority=2)])
    assert plan(state, NOW, PolicyConfig(ordering="priority", contract=False)).preemptions == ()
