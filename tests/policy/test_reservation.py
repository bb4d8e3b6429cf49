"""Reservation and backfill (DESIGN 5 step 6): a large job is not starved by a stream of small ones."""

from scheduling.policy import PolicyConfig, ReasonCode, plan
from tests.policy.builders import HOUR, NOW, nodes, pending, reason_of, running, snapshot, tree

TREE = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 10), ("org/free", "org", 0))
USAGE = {"org/a": 1e5, "org/b": 1e7}


def half_full_cluster():
    """Two 8-GPU nodes, each half used by protected work: 8 GPUs free, but no whole node."""
    return [
        running(10, "org/b", {"n0": 4}, protected_until=NOW + 2 * HOUR),
        running(11, "org/b", {"n1": 4}, protected_until=NOW + 1 * HOUR),
    ]


def test_the_best_ranked_blocked_job_reserves_the_nodes_that_free_up_earliest():
    state = snapshot(
        TREE,
        nodes(3),
        run=half_full_cluster() + [running(12, "org/b", {"n2": 8}, protected_until=NOW + 5 * HOUR)],
        queue=[pending(1, "org/a", 16)],
        usage=USAGE,
    )
    result = plan(state, NOW, PolicyConfig())
    (reservation,) = result.reservations
    assert reservation.workload_id == 1
    assert reservation.nodes == ("n0", "n1")
    assert reservation.start_at == NOW + 2 * HOUR
    assert reason_of(result, 1).estimated_start == NOW + 2 * HOUR


def test_small_protected_jobs_may_not_take_reserved_nodes():
    queue = [pending(1, "org/a", 16), pending(2, "org/a", 4, min_runtime_s=4 * HOUR)]
    result = plan(
        snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue, usage=USAGE), NOW, PolicyConfig()
    )
    assert result.starts == ()
    reason = reason_of(result, 2)
    assert reason.code == ReasonCode.RESERVED_FOR_LARGER_JOB
    assert "16-GPU job" in reason.message


def test_a_job_that_ends_before_the_reservation_backfills():
    queue = [pending(1, "org/a", 16), pending(2, "org/a", 4, min_runtime_s=HOUR, max_runtime_s=HOUR)]
    result = plan(
        snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue, usage=USAGE), NOW, PolicyConfig()
    )
    assert [start.workload_id for start in result.starts] == [2]


def test_preemptible_work_backfills_reserved_nodes():
    queue = [pending(1, "org/a", 16), pending(2, "org/a", 4, min_runtime_s=0), pending(3, "org/free", 4)]
    result = plan(
        snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue, usage=USAGE), NOW, PolicyConfig()
    )
    assert sorted(start.workload_id for start in result.starts) == [2, 3]
    assert all(start.protected_until <= result.reservations[0].start_at for start in result.starts)


def test_without_reservation_small_jobs_keep_the_large_one_waiting():
    queue = [pending(1, "org/a", 16), pending(2, "org/a", 4, min_runtime_s=4 * HOUR)]
    config = PolicyConfig(reservation=False)
    result = plan(snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue, usage=USAGE), NOW, config)
    assert [start.workload_id for start in result.starts] == [2]
    assert result.reservations == ()


def test_without_backfill_nothing_else_may_use_the_reserved_nodes():
    queue = [pending(1, "org/a", 16), pending(2, "org/a", 4, min_runtime_s=0)]
    config = PolicyConfig(backfill=False)
    result = plan(snapshot(TREE, nodes(2), run=half_full_cluster(), queue=queue, usage=USAGE), NOW, config)
    assert result.starts == ()
    assert reason_of(result, 2).code == ReasonCode.RESERVED_FOR_LARGER_JOB
