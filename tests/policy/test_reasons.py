"""Pending reasons (DESIGN 6): one code, parameters, a plain sentence, a position, an estimate."""

import pytest

from scheduling.policy import PolicyConfig, ReasonCode, plan
from tests.policy.builders import HOUR, NOW, nodes, order, pending, reason_of, running, snapshot, tree

TREE = tree(("org", None, 20), ("org/a", "org", 10, 8), ("org/b", "org", 10), ("org/free", "org", 0))


def only_reason(state, workload_id=1, config=None):
    return reason_of(plan(state, NOW, config or PolicyConfig()), workload_id)


def test_held_work_says_who_held_it_when_and_why():
    held_at = 36_000.0  # 10:00 UTC
    queue = [pending(1, "org/b", 1, held=True, held_by="alice", held_at=held_at, held_note="maintenance")]
    reason = only_reason(snapshot(TREE, nodes(1), queue=queue))
    assert reason.code == ReasonCode.HELD
    assert reason.message == "held by alice at 10:00: 'maintenance'"


def test_an_unavailable_backend_plans_nothing_and_says_so_for_everyone():
    queue = [pending(1, "org/b", 1), pending(2, "org/a", 1)]
    state = snapshot(
        TREE,
        nodes(1),
        queue=queue,
        backend_available=False,
        backend_name="Slurm controller",
        backend_error_at=36_240.0,
    )
    result = plan(state, NOW, PolicyConfig())
    assert result.starts == () and result.preemptions == ()
    assert {reason.code for reason in result.reasons} == {ReasonCode.BACKEND_UNAVAILABLE}
    assert result.reasons[0].message == "the Slurm controller did not answer at 10:04; retrying"


def test_a_shape_no_healthy_node_can_hold_says_no_matching_nodes():
    reason = only_reason(snapshot(TREE, nodes(2), queue=[pending(1, "org/b", 8, gpu_type="B200")]))
    assert reason.code == ReasonCode.NO_MATCHING_NODES
    assert "8 x B200" in reason.message


def test_unhealthy_nodes_do_not_count():
    from dataclasses import replace

    sick = tuple(replace(node, healthy=False) for node in nodes(2))
    assert (
        only_reason(snapshot(TREE, sick, queue=[pending(1, "org/b", 8)])).code == ReasonCode.NO_MATCHING_NODES
    )


def test_a_reached_concurrency_limit_says_over_limit():
    state = snapshot(TREE, nodes(2), run=[running(10, "org/a", {"n0": 8})], queue=[pending(1, "org/a", 1)])
    reason = only_reason(state)
    assert reason.code == ReasonCode.OVER_LIMIT
    assert reason.message == "org/a's concurrency limit (8 GPUs) is reached"


def test_free_gpus_spread_over_nodes_say_fragmented():
    run = [
        running(10, "org/b", {"n0": 4}, protected_until=NOW + HOUR),
        running(11, "org/b", {"n1": 4}, protected_until=NOW + HOUR),
    ]
    state = snapshot(TREE, nodes(2), run=run, queue=[pending(1, "org/free", 8)])
    reason = only_reason(state, config=PolicyConfig(ordering="fifo", contract=False))
    assert reason.code == ReasonCode.FRAGMENTED
    assert reason.message == "8 GPUs are free but spread over 2 nodes; needs 8 GPUs on one node"


def test_a_full_cluster_says_waiting_for_gpus_with_the_earliest_end():
    run = [running(10, "org/b", {"n0": 8}, expected_end=NOW + 2 * HOUR)]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/b", 8)])
    reason = only_reason(state, config=PolicyConfig(ordering="fifo", contract=False))
    assert reason.code == ReasonCode.WAITING_FOR_GPUS
    assert reason.estimated_start == NOW + 2 * HOUR


def test_a_one_gpu_job_reads_in_the_singular():
    run = [running(10, "org/b", {"n0": 8}, expected_end=NOW + 2 * HOUR)]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/b", 1)])
    reason = only_reason(state, config=PolicyConfig(ordering="fifo", contract=False))
    assert reason.message.startswith("needs 1 GPU on one node;")


def test_work_behind_more_under_served_allocations_says_fair_share_queued():
    usage = {"org/a": 1e5, "org/b": 1e7}
    queue = [pending(1, "org/b", 8), pending(2, "org/a", 8), pending(3, "org/a", 8)]
    result = plan(snapshot(TREE, nodes(1), queue=queue, usage=usage), NOW, PolicyConfig())
    assert [start.workload_id for start in result.starts] == [2]
    reason = reason_of(result, 1)
    assert reason.code == ReasonCode.FAIR_SHARE_QUEUED
    assert reason.params["ahead"] == 1
    assert "org/b is at 1.98x its share" in reason.message


def test_unfunded_work_that_cannot_start_says_unfunded():
    state = snapshot(TREE, nodes(1), run=[running(10, "org/b", {"n0": 8})], queue=[pending(1, "org/free", 1)])
    assert only_reason(state).code == ReasonCode.UNFUNDED


@pytest.mark.parametrize("ordering", ["fairshare", "priority", "fifo"])
def test_every_pending_workload_gets_exactly_one_reason_and_a_distinct_position(ordering):
    queue = [pending(i, ("org/a", "org/b", "org/free")[i % 3], 1 + i % 8, held=i == 7) for i in range(1, 30)]
    result = plan(snapshot(TREE, nodes(2), queue=queue), NOW, PolicyConfig(ordering=ordering))
    started = {start.workload_id for start in result.starts}
    assert sorted(reason.workload_id for reason in result.reasons) == sorted(set(range(1, 30)) - started)
    assert sorted(reason.position for reason in result.reasons) == list(range(1, len(result.reasons) + 1))
    assert order(result)[-1] == 7  # held work comes last


def test_the_plan_reports_per_phase_timings():
    result = plan(snapshot(TREE, nodes(1), queue=[pending(1, "org/a", 1)]), NOW, PolicyConfig())
    assert {"rank", "admit", "explain"} <= set(result.timings_ms)
    assert all(value >= 0 for value in result.timings_ms.values())


def test_the_reasons_read_like_the_tuple_of_them_and_one_can_be_read_alone():
    queue = [pending(i, "org/b", 8) for i in range(1, 6)] + [pending(9, "org/b", 1, held=True)]
    state = snapshot(TREE, nodes(1), run=[running(10, "org/a", {"n0": 8})], queue=queue)
    reasons = plan(state, NOW, PolicyConfig()).reasons
    made = tuple(reasons)
    assert [r.workload_id for r in made] == [1, 2, 3, 4, 5, 9]
    assert [r.position for r in made] == [1, 2, 3, 4, 5, 6]
    assert reasons == made and made == reasons and list(made) == reasons
    assert reasons[1:3] == made[1:3] and reasons[-1] == made[-1] and reasons[::2] == made[::2]
    assert reasons.get(3) == made[2] and reasons.get(10) is None
    assert [(i, outcome[2], p) for i, outcome, p in reasons.entries()] == [
        (r.workload_id, r.message, r.position) for r in made
    ]
    with pytest.raises(IndexError):
        reasons[6]
    assert reasons != made[:-1]


def test_only_some_reasons_keep_their_places_in_the_whole_order():
    queue = [pending(i, "org/b", 8) for i in range(1, 6)]
    state = snapshot(TREE, nodes(1), run=[running(10, "org/a", {"n0": 8})], queue=queue)
    some = plan(state, NOW, PolicyConfig(), explain=frozenset({2, 5})).reasons
    assert [(r.workload_id, r.position) for r in some] == [(2, 2), (5, 5)]
    assert some.get(5).position == 5
