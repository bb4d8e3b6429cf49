"""``plan(..., explain=...)``: no reasons, or only some, never changes a decision or a reason."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from benchmarks import policy_pass
from scheduling.policy import PolicyConfig, plan
from scheduling.policy.grouping import group_pending
from scheduling.policy.planner import plan_grouped
from scheduling.policy.replay import after_plan
from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
from tests.policy import builders as b
from tests.policy.test_properties import NOW, SETTINGS, snapshots

ORDERINGS = st.sampled_from(["fairshare", "priority", "fifo"])
CONFIGS = st.builds(
    PolicyConfig,
    ordering=ORDERINGS,
    preemption=st.booleans(),
    contract=st.booleans(),
    reservation=st.booleans(),
    backfill=st.booleans(),
    settle=st.booleans(),
    projected_charge_s=st.sampled_from([0.0, 3600.0, 360000.0]),
)


def decisions(result) -> tuple:
    return (result.starts, result.preemptions, result.reservations, dict(result.fair_share))


@given(snapshots(), CONFIGS)
@SETTINGS
def test_without_explaining_the_decisions_are_the_same_and_there_are_no_reasons(state, config):
    full = plan(state, NOW, config)
    bare = plan(state, NOW, config, explain=False)
    assert bare.reasons == ()
    assert decisions(bare) == decisions(full)
    assert "explain" not in bare.timings_ms


@given(snapshots(), CONFIGS, st.data())
@SETTINGS
def test_explaining_some_workloads_gives_exactly_their_reasons_from_the_full_explanation(state, config, data):
    full = plan(state, NOW, config)
    known = [workload.id for workload in state.pending] + [workload.id for workload in state.running]
    wanted = frozenset(data.draw(st.lists(st.sampled_from(known + [-1]), max_size=4)))
    some = plan(state, NOW, config, explain=wanted)
    assert decisions(some) == decisions(full)
    assert some.reasons == tuple(reason for reason in full.reasons if reason.workload_id in wanted)


@given(snapshots(), CONFIGS)
@SETTINGS
def test_each_workload_explained_alone_gets_its_reason_from_the_full_explanation(state, config):
    full = plan(state, NOW, config)
    for reason in full.reasons:
        alone = plan_grouped(state, NOW, config, group_pending(state.pending), explain={reason.workload_id})
        assert alone.reasons == (reason,)
    # and on the next pass, which starts from what this one decided
    following = after_plan(state, full, NOW)
    again = plan(following, NOW, config)
    for reason in again.reasons:
        assert plan(following, NOW, config, explain=frozenset({reason.workload_id})).reasons == (reason,)


def test_an_unavailable_backend_explains_only_what_is_asked():
    state = b.snapshot(
        b.tree(("org", None, 10.0), ("org/a", "org", 10.0)),
        b.nodes(1),
        queue=[
            b.pending(1, "org/a", 1, submitted_at=NOW - 2),
            b.pending(2, "org/a", 1, submitted_at=NOW - 1),
        ],
        backend_available=False,
    )
    full = plan(state, NOW, PolicyConfig())
    assert len(full.reasons) == 2
    assert plan(state, NOW, PolicyConfig(), explain=frozenset({2})).reasons == full.reasons[1:]
    assert plan(state, NOW, PolicyConfig(), explain=False).reasons == ()


def test_a_busy_cluster_with_an_untried_tail_explains_any_workload_alone_exactly():
    state = policy_pass.build_snapshot(400, 12, seed=3)
    config = PolicyConfig()
    full = plan(state, policy_pass.NOW, config)
    assert plan(state, policy_pass.NOW, config, explain=False).starts == full.starts
    for reason in full.reasons[::7] + full.reasons[-5:]:
        alone = plan(state, policy_pass.NOW, config, explain=frozenset({reason.workload_id}))
        assert alone.reasons == (reason,)
    wanted = frozenset(reason.workload_id for reason in full.reasons[1::3])
    assert plan(state, policy_pass.NOW, config, explain=wanted).reasons == full.reasons[1::3]


def test_without_explaining_a_small_job_behind_a_long_queue_of_big_ones_still_starts():
    """Not explaining lets a walk stop once nothing queued could start on the GPUs still free;
    a 1-GPU job behind forty 8-GPU jobs that cannot fit must still get the one free GPU."""
    budget = b.tree(("org", None, 100.0), ("org/a", "org", 100.0), ("org/free", "org", 0.0))
    busy = [
        b.running(1, "org/a", {"n0": 7}, protected_until=NOW + b.HOUR),
        b.running(2, "org/a", {"n1": 8}, protected_until=NOW + b.HOUR),
    ]
    big = [b.pending(100 + i, "org/free", 8, user=f"u{i:02d}") for i in range(40)]
    small = b.pending(200, "org/free", 1, user="zed")
    for queue, started in ((big + [small], [200]), (big, [])):
        state = b.snapshot(budget, b.nodes(2), run=busy, queue=queue)
        full = plan(state, NOW, PolicyConfig())
        bare = plan(state, NOW, PolicyConfig(), explain=False)
        assert [start.workload_id for start in bare.starts] == started
        assert decisions(bare) == decisions(full)


def test_without_explaining_every_pass_of_a_small_simulated_lab_decides_what_explaining_does():
    """A day and a half of a 128-GPU lab: preemptions, moves of requeued victims, settling
    walks and reservations, each pass planned both ways (a walk that records nothing takes
    shortcuts: it skips queues where nothing can start and walks that would repeat the last)."""
    lab = Ai2Parameters(
        days=1.0, warmup_days=0.5, seed=1, nodes=16, nodes_per_domain=8, teams=4, researchers=20
    )
    differing, passes = [], []

    def both(state, now, config):
        full = plan(state, now, config)
        passes.append(now)
        if decisions(plan(state, now, config, explain=False)) != decisions(full):
            differing.append(now)
        return full

    run_simulation(ai2_scenario(lab), policy="fairshare", planner=both)
    assert len(passes) > 200
    assert differing == []
