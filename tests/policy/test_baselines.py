"""The baselines a user would pick instead of fair share (issue 17, point 5): ``easy`` (first come
first served with EASY backfill) and ``slurm`` (Fair Tree with the same backfill, no preemption)."""

from scheduling.policy import PolicyConfig, ReasonCode, plan
from scheduling.simulator import policy_config
from tests.policy.builders import HOUR, NOW, nodes, pending, reason_of, running, snapshot, tree

TREE = tree(("org", None, 16), ("org/a", "org", 8), ("org/b", "org", 8), ("org/free", "org", 0))


def half_full_cluster():
    """Two 8-GPU nodes, each half used by work that declared when it ends: 8 GPUs free, but no
    whole node. Without preemption both nodes are wholly free at NOW + 2 h."""
    return [
        running(10, "org/b", {"n0": 4}, expected_end=NOW + 2 * HOUR),
        running(11, "org/b", {"n1": 4}, expected_end=NOW + 1 * HOUR),
    ]


def started(result) -> list[int]:
    return sorted(start.workload_id for start in result.starts)


def test_easy_the_head_job_reserves_and_only_work_that_ends_in_time_backfills():
    queue = [
        pending(1, "org/a", 16),  # the head: 16 GPUs, both nodes wholly free at NOW + 2 h
        pending(2, "org/a", 4, user="carol", max_runtime_s=HOUR),  # ends at NOW + 1 h: in time
        pending(3, "org/b", 4, user="dave", max_runtime_s=3 * HOUR),  # ends at NOW + 3 h: too late
        pending(4, "org/free", 4, user="erin"),  # declares no maximum runtime
    ]
    result = plan(snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue), NOW, policy_config("easy"))
    (reservation,) = result.reservations
    assert (reservation.workload_id, reservation.nodes, reservation.start_at) == (
        1,
        ("n0", "n1"),
        NOW + 2 * HOUR,
    )
    assert started(result) == [2]
    assert result.preemptions == ()
    for waiting in (3, 4):
        assert reason_of(result, waiting).code == ReasonCode.RESERVED_FOR_LARGER_JOB


def test_easy_backfill_is_first_come_first_served_not_fair_share():
    """The head is the oldest job, whatever its allocation's usage: org/b has used 100 times more
    than org/a, and its 16-GPU job still reserves ahead of org/a's later one."""
    queue = [pending(1, "org/b", 16), pending(2, "org/a", 16)]
    usage = {"org/a": 1e5, "org/b": 1e7}
    state = snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue, usage=usage)
    assert [r.workload_id for r in plan(state, NOW, policy_config("easy")).reservations] == [1]
    assert [r.workload_id for r in plan(state, NOW, policy_config("slurm")).reservations] == [2]


def test_the_drain_rule_lets_work_without_a_runtime_backfill_but_easy_does_not():
    """The same reserved nodes: under "release" (the drain rule, no contract) work that declares
    no runtime backfills, because it could be preempted in time; EASY has no preemption."""
    queue = [pending(1, "org/a", 16), pending(4, "org/free", 4, user="erin")]
    state = snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue)
    drain = PolicyConfig(ordering="fifo", contract=False, preemption=False)
    assert started(plan(state, NOW, drain)) == [4]
    assert started(plan(state, NOW, policy_config("easy"))) == []


def test_easy_a_short_job_backfills_even_behind_a_long_one_of_the_same_shape():
    queue = [
        pending(1, "org/a", 16),
        pending(3, "org/b", 4, user="dave", max_runtime_s=3 * HOUR),  # too late: waits
        pending(5, "org/b", 4, user="dave", max_runtime_s=HOUR),  # in time: backfills
    ]
    result = plan(snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue), NOW, policy_config("easy"))
    assert started(result) == [5]


def test_slurm_orders_by_fair_tree():
    """One node free for one 8-GPU job; org/b submitted first but has used far more of its
    budget than org/a: Fair Tree starts org/a's job, first come first served org/b's."""
    run = [running(10, "org/b", {"n1": 8}, expected_end=NOW + HOUR)]
    queue = [pending(1, "org/b", 8, user="dave"), pending(2, "org/a", 8, user="carol")]
    state = snapshot(TREE, nodes(2), run=run, queue=queue, usage={"org/a": 1e5, "org/b": 1e7})
    assert started(plan(state, NOW, policy_config("slurm"))) == [2]
    assert started(plan(state, NOW, policy_config("easy"))) == [1]


def test_slurm_never_preempts_where_fair_share_would():
    """A full cluster of unfunded and over-served work past any protection, and an under-served
    funded job waiting: fair share preempts for it; slurm reserves and waits."""
    run = [
        running(10, "org/free", {"n0": 8}, funded=False, expected_end=NOW + 3 * HOUR),
        running(11, "org/b", {"n1": 8}, expected_end=NOW + 2 * HOUR),
    ]
    queue = [pending(1, "org/a", 16, min_runtime_s=HOUR)]
    state = snapshot(TREE, nodes(2), run=run, queue=queue, usage={"org/a": 1e5, "org/b": 1e7})
    assert plan(state, NOW, policy_config("fairshare")).preemptions != ()
    result = plan(state, NOW, policy_config("slurm"))
    assert (result.preemptions, result.starts) == ((), ())
    (reservation,) = result.reservations
    assert (reservation.workload_id, reservation.start_at) == (1, NOW + 3 * HOUR)


def test_the_existing_baselines_are_unchanged():
    assert policy_config("fifo") == PolicyConfig(
        ordering="fifo", contract=False, preemption=False, reservation=False, backfill=False
    )
    assert policy_config("priority") == PolicyConfig(
        ordering="priority", contract=False, reservation=False, backfill=False
    )
    assert policy_config("fairshare").backfill_by == "release"
