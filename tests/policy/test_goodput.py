"""The rules of issue 17, each on a case worked out by hand: preemption that weighs the work it
throws away (checkpoints, idle sessions, a clear margin before ending work, no churn near a
tie) and the lane that lets short work start on a full cluster. Each case is planned with the
rule on and off, so a test fails if the rule stops deciding it."""

from __future__ import annotations

from dataclasses import replace

from scheduling.policy import PolicyConfig, plan
from scheduling.policy.replay import after_plan
from scheduling.policy.types import GOODPUT
from tests.policy.builders import HOUR, NOW, nodes, pending, running, snapshot, tree

OFF = PolicyConfig()
ON = replace(OFF, **GOODPUT)
MINUTE = 60.0

# "org/a" has used nothing; "org/b" has used far more than its (equal) share.
TWO = tree(("org", None, 100), ("org/a", "org", 50), ("org/b", "org", 50))
OVER_SERVED = {"org/a": 0.0, "org/b": 1e9}


def preempted(config: PolicyConfig, state, now: float = NOW) -> list[int]:
    return sorted(p.workload_id for p in plan(state, now, config, explain=False).preemptions)


def checkpointing():
    """Two resumable 8-GPU jobs of org/b checkpoint every 30 minutes: 11 started 2 h 1 min ago
    (1 minute since its last checkpoint), 12 started 2 h 29 min ago (29 minutes). org/a needs
    one node."""
    return snapshot(
        TWO,
        nodes(2),
        run=[
            running(11, "org/b", {"n0": 8}, started_at=NOW - 2 * HOUR - MINUTE, checkpoint_interval_s=1800.0),
            running(
                12, "org/b", {"n1": 8}, started_at=NOW - 2 * HOUR - 29 * MINUTE, checkpoint_interval_s=1800.0
            ),
        ],
        queue=[pending(1, "org/a", 8)],
        usage=OVER_SERVED,
    )


def test_the_victim_that_just_checkpointed_goes_first():
    any_loss = replace(ON, max_loss_per_gpu_s=None)
    assert preempted(any_loss, checkpointing()) == [11]  # 8 GPU-minutes lost, not 232
    # 2 minutes later 11 is 3 minutes past its checkpoint and 12 has just checkpointed (1 minute)
    assert preempted(any_loss, checkpointing(), NOW + 2 * MINUTE) == [12]
    # without weighing checkpoints resumable work loses nothing either way: id order
    assert preempted(OFF, checkpointing()) == preempted(OFF, checkpointing(), NOW + 2 * MINUTE) == [11]


def test_a_victim_far_from_its_checkpoint_is_left_to_save_its_work_first():
    # At most 3 minutes per GPU may be lost. 12 checkpoints at NOW + 1 min, 11 at NOW + 29 min.
    # At NOW + 10 min job 11 is 11 minutes past its checkpoint and 12 is 9: neither is taken
    # (with any loss acceptable, 12 is); at NOW + 3 min 12 is 2 minutes past its own: taken.
    assert ON.max_loss_per_gpu_s == 3 * MINUTE
    assert preempted(ON, checkpointing()) == [11]
    assert preempted(ON, checkpointing(), NOW + 10 * MINUTE) == []
    assert preempted(replace(ON, max_loss_per_gpu_s=None), checkpointing(), NOW + 10 * MINUTE) == [12]
    assert preempted(ON, checkpointing(), NOW + 3 * MINUTE) == [12]


def over_its_share(minutes_past_checkpoint: float):
    """Three equal allocations: org/a has used 40% of the window's usage (1.2 times its share),
    org/b 60% (1.8 times), org/c nothing. b's resumable job 51 checkpoints every 30 minutes."""
    return snapshot(
        tree(("org", None, 90), ("org/a", "org", 30), ("org/b", "org", 30), ("org/c", "org", 30)),
        nodes(1),
        run=[
            running(
                51,
                "org/b",
                {"n0": 8},
                started_at=NOW - HOUR - minutes_past_checkpoint * MINUTE,
                checkpoint_interval_s=1800.0,
            )
        ],
        queue=[pending(1, "org/a", 8)],
        usage={"org/a": 4e8, "org/b": 6e8},
    )


def test_only_an_allocation_under_its_share_makes_a_victim_lose_work():
    # b is 1.5 times further over its share than a, so a may take b's node: at b's checkpoint,
    # losing nothing; 2 minutes past it (within the limit), not for a, which is over its own
    # share and owed nothing more; without the rule (any loss), it would.
    assert preempted(ON, over_its_share(0)) == [51]
    assert preempted(ON, over_its_share(2)) == []
    assert preempted(replace(ON, max_loss_per_gpu_s=None), over_its_share(2)) == [51]
    # a under its share (a tenth of b's usage) may make it lose those 2 minutes
    assert preempted(ON, replace(over_its_share(2), usage={"org/a": 6e7, "org/b": 6e8})) == [51]


def test_a_peer_far_from_its_checkpoint_is_left_to_save_its_work_first_too():
    # Within one allocation: bob has used far more than alice, so alice's job may take his node.
    # His resumable job 41 checkpoints every 30 minutes and is 29 minutes past its last one:
    # taken at once only when any loss is acceptable; with the rule, a minute later, when it
    # has just checkpointed. His job 42 is not resumable: a peer's work is never ended for her.
    def state(resumable: bool):
        return snapshot(
            TWO,
            nodes(1),
            run=[
                running(
                    41 if resumable else 42,
                    "org/a",
                    {"n0": 8},
                    started_at=NOW - 2 * HOUR - 29 * MINUTE,
                    checkpoint_interval_s=1800.0,
                    resumable=resumable,
                )
            ],
            queue=[pending(1, "org/a", 8)],
            user_usage={("org/a", "bob"): 10 * HOUR * 8},
        )

    assert preempted(replace(ON, max_loss_per_gpu_s=None), state(True)) == [41]
    assert preempted(ON, state(True)) == []
    assert preempted(ON, state(True), NOW + MINUTE) == [41]
    assert preempted(ON, state(False)) == preempted(ON, state(False), NOW + MINUTE) == []


def gang_past_its_checkpoint(*waiting, minutes: float = 2):
    """org/b's resumable 32-GPU gang fills the 4 nodes; it checkpoints every 30 minutes and did
    ``minutes`` ago, so each of its GPUs would lose that long (2: within the 3-minute limit, 64
    GPU-minutes in all). org/a, unused, waits with ``waiting``."""
    gang = running(
        21,
        "org/b",
        {"n0": 8, "n1": 8, "n2": 8, "n3": 8},
        started_at=NOW - 2 * HOUR - minutes * MINUTE,
        checkpoint_interval_s=1800.0,
    )
    return snapshot(TWO, nodes(4), run=[gang], queue=list(waiting), usage=OVER_SERVED)


def test_a_narrow_job_does_not_throw_away_a_gangs_work():
    # Together the victims may lose 3 minutes for each GPU the preemptor gets: a one-GPU batch
    # job may cost 3 GPU-minutes, not the gang's 64; a 32-GPU job may cost 96. At the gang's
    # next checkpoint nothing is lost.
    one_gpu = pending(1, "org/a", 1)
    assert preempted(ON, gang_past_its_checkpoint(one_gpu)) == []
    assert preempted(replace(ON, max_loss_per_gpu_s=None), gang_past_its_checkpoint(one_gpu)) == [21]
    assert preempted(ON, gang_past_its_checkpoint(pending(1, "org/a", 32))) == [21]
    assert preempted(ON, gang_past_its_checkpoint(one_gpu), NOW + 28 * MINUTE) == [21]


def test_short_work_may_cost_its_victims_at_most_the_work_it_does():
    # Short work may make its victims lose up to 30 minutes (short_max_runtime_s) for each GPU it
    # gets. One minute past its checkpoint the gang would lose 32 GPU-minutes: more than a
    # one-GPU debug job's 30, less than a two-GPU one's 60; two minutes past, 64: more than either.
    debug = pending(1, "org/a", 1, workload_class="debug", max_runtime_s=600.0)
    pair = replace(debug, gpus=2)
    assert ON.short_max_runtime_s == 30 * MINUTE
    assert preempted(ON, gang_past_its_checkpoint(debug, minutes=1)) == []
    assert preempted(ON, gang_past_its_checkpoint(pair, minutes=1)) == [21]
    assert preempted(ON, gang_past_its_checkpoint(pair, minutes=2)) == []
    # batch work of that width may cost 6 GPU-minutes: it waits; first in line, it fails, and
    # the debug job of the same shape behind it still preempts; the gang's GPUs go to both
    batch = replace(pair, workload_class="batch", max_runtime_s=None)
    assert preempted(ON, gang_past_its_checkpoint(batch, minutes=1)) == []
    both = plan(gang_past_its_checkpoint(batch, replace(pair, id=2), minutes=1), NOW, ON, explain=False)
    assert [p.workload_id for p in both.preemptions] == [21]
    assert {s.workload_id for s in both.starts} == {1, 2}
    # Whatever its allocation's standing: org/a is over its share, so its batch job may not make
    # org/b's job lose its 2 minutes on 8 GPUs (16 GPU-minutes); its one-GPU debug job may.
    over = over_its_share(2)
    assert preempted(ON, over) == []
    assert preempted(ON, replace(over, pending=(debug,))) == [51]
    assert preempted(ON, replace(over_its_share(29), pending=(debug,))) == []  # 232 GPU-minutes


def test_a_job_kept_waiting_for_a_gangs_checkpoint_is_told_when_it_is():
    # The gang checkpointed 2 minutes ago, every 30 minutes: it saves next at NOW + 28 minutes,
    # when the one-GPU job may take it losing nothing (see the test above). The job is told so,
    # with that time as its estimated start, not a bare "waiting for GPUs".
    one_gpu = pending(1, "org/a", 1)
    reason = plan(gang_past_its_checkpoint(one_gpu), NOW, ON).reasons.get(1)
    assert reason is not None and reason.code == "WAITING_FOR_GPUS"
    assert "saves its progress at ~" in reason.message
    assert "since its last checkpoint" in reason.message
    assert reason.estimated_start == NOW + 28 * MINUTE
    assert reason.params["checkpoint_at"] == NOW + 28 * MINUTE
    # asked for this job's reason alone (as a page does), the same reason
    assert plan(gang_past_its_checkpoint(one_gpu), NOW, ON, explain=frozenset({1})).reasons.get(1) == reason
    # without the loss limit it preempts at once
    assert plan(gang_past_its_checkpoint(one_gpu), NOW, replace(ON, max_loss_per_gpu_s=None)).starts


def test_an_idle_session_goes_before_a_busy_one():
    # Two interactive sessions of org/b, past their protection: 21 busy and started an hour ago,
    # 22 idle and started three hours ago (more work to lose, if it were working).
    state = snapshot(
        TWO,
        nodes(2),
        run=[
            running(
                21, "org/b", {"n0": 8}, started_at=NOW - HOUR, resumable=False, workload_class="interactive"
            ),
            running(
                22,
                "org/b",
                {"n1": 8},
                started_at=NOW - 3 * HOUR,
                resumable=False,
                workload_class="interactive",
                idle=True,
            ),
        ],
        queue=[pending(1, "org/a", 8)],
        usage=OVER_SERVED,
    )
    assert preempted(ON, state) == [22]
    assert preempted(OFF, state) == [21]  # least work lost alone


def near_tie(usage_a: float):
    """org/b runs a non-resumable job past its protection; org/a waits with ``usage_a``."""
    return snapshot(
        TWO,
        nodes(1),
        run=[running(31, "org/b", {"n0": 8}, resumable=False)],
        queue=[pending(1, "org/a", 8)],
        usage={"org/a": usage_a, "org/b": 10 * HOUR * 8},
    )


def test_a_near_tie_does_not_end_non_resumable_work():
    # org/a has used 90% of what org/b used (equal budgets): the rank rule alone lets it take
    # org/b's node and end job 31; the margin (org/a is not under half its share) and the
    # hysteresis (org/b is not 25% above org/a) keep the work.
    state = near_tie(0.9 * 10 * HOUR * 8)
    assert preempted(OFF, state) == [31]
    assert preempted(ON, state) == []
    assert preempted(replace(ON, end_work_margin=0.0), state) == []  # the hysteresis alone
    assert preempted(replace(ON, rebalance_hysteresis=0.0), state) == []  # the margin alone


def test_an_allocation_far_under_its_share_still_takes_its_gpus_back():
    # With a margin of 1 only an allocation that used nothing may end funded work; with a
    # margin of 0.5, one that used a tenth of org/b's usage (equal budgets) may too.
    assert preempted(ON, near_tie(0.0)) == [31]
    assert preempted(ON, near_tie(0.1 * 10 * HOUR * 8)) == []
    assert preempted(replace(ON, end_work_margin=0.5), near_tie(0.1 * 10 * HOUR * 8)) == [31]


def test_a_margin_still_lets_resumable_work_be_requeued():
    state = replace(near_tie(0.9 * 10 * HOUR * 8), running=(running(31, "org/b", {"n0": 8}),))
    assert preempted(replace(ON, rebalance_hysteresis=0.0), state) == [31]


def test_a_debug_job_starts_in_the_next_pass_on_a_full_cluster():
    # 4 nodes x 8 GPUs; the lane keeps ceil(2% of 32) = 1 GPU free. org/b's batch queue (each
    # job protected for an hour once started) would fill every GPU; one pass later a funded
    # debug job of org/a arrives: without the lane it waits an hour for protection to end.
    batch = [pending(100 + i, "org/b", 1, user="bob", min_runtime_s=HOUR) for i in range(40)]
    first = snapshot(TWO, nodes(4), queue=batch)
    for config, starts in ((ON, 31), (OFF, 32)):
        result = plan(first, NOW, config, explain=False)
        assert len(result.starts) == starts
        later = after_plan(first, result, NOW)
        debug = pending(1, "org/a", 1, workload_class="debug", max_runtime_s=600.0, submitted_at=NOW + 5.0)
        second = replace(later, pending=(*later.pending, debug))
        started = {start.workload_id for start in plan(second, NOW + 10.0, config, explain=False).starts}
        assert (1 in started) is (config is ON)


def test_work_that_is_not_short_is_told_the_lane_keeps_it_waiting():
    # 4 GPUs free on the one node, half of the node's 8 kept for short work: a 4-GPU batch job
    # waits and is told why; a 1-GPU debug job starts on the same GPUs.
    run = [running(41, "org/b", {"n0": 4}, resumable=False)]
    lane = replace(ON, short_lane_fraction=0.5)
    batch = plan(snapshot(TWO, nodes(1), run=run, queue=[pending(1, "org/a", 4)]), NOW, lane)
    assert batch.starts == ()
    reason = batch.reasons[0]
    assert "the last 4 free GPUs are kept for short work" in reason.message
    assert reason.params["kept_for_short"] == 4
    debug = pending(2, "org/a", 1, workload_class="debug")
    assert [
        s.workload_id for s in plan(snapshot(TWO, nodes(1), run=run, queue=[debug]), NOW, lane).starts
    ] == [2]


def test_work_that_needs_whole_nodes_is_never_held_back_by_the_lane():
    # One 4-GPU node and a lane of 2 GPUs: a 4-GPU job takes the whole node (else it never
    # could), a 3-GPU job would leave 1 GPU for short work and waits.
    lane = replace(ON, short_lane_fraction=0.5)
    whole = plan(snapshot(TWO, nodes(1, gpus=4), queue=[pending(1, "org/a", 4)]), NOW, lane)
    assert [s.workload_id for s in whole.starts] == [1]
    part = plan(snapshot(TWO, nodes(1, gpus=4), queue=[pending(2, "org/a", 3)]), NOW, lane)
    assert part.starts == ()
