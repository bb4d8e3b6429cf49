"""The engine on tiny clusters whose every number is computed by hand (with the real ``plan()``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec, Plan, Start
from scheduling.simulator import NodeOutage, SimJob, SimulationError, run_simulation
from tests.simulator.standin import first_come_first_served, tiny_input


@pytest.fixture
def preemption_story():
    """One 4-GPU node; team ``lab/a`` owns all of it; unfunded work soaks it up until a needs it.

    t=0    unfunded U (4 GPUs, 1000 s of work, checkpoints every 100 s) starts.
    t=250  A (2 GPUs, 300 s) arrives and preempts U: U saved 200 s, lost 50 s x 4 GPUs; A starts.
    t=255  debug B (2 GPUs, 100 s) arrives; the pass at t=260 starts it (wait 5 s).
    t=360  B ends; U needs 4 GPUs and waits. t=550 A ends; U restarts (requeue wait 300 s),
    t=1350 U ends. Horizon t=1400.
    """
    jobs = [
        SimJob(1, "lab/free", "carol", 4, 0.0, 1000.0, resumable=True, checkpoint_s=100.0),
        SimJob(2, "lab/a", "alice", 2, 250.0, 300.0, min_runtime_s=300.0),
        SimJob(3, "lab/a", "bob", 2, 255.0, 100.0, workload_class="debug", min_runtime_s=100.0),
    ]
    tree = [
        BudgetNodeSpec("lab", None, 4.0),
        BudgetNodeSpec("lab/a", "lab", 4.0),
        BudgetNodeSpec("lab/free", "lab", 0.0),
    ]
    return tiny_input(jobs, nodes=[ClusterNodeSpec("n1", 4, "H100")], tree=tree, seconds=1400.0)


def test_funded_work_preempts_unfunded_work_and_every_number_matches_the_hand_computation(preemption_story):
    summary = run_simulation(preemption_story, policy="fairshare").summary

    # owed: A wants 2 GPUs for 300 s, B 2 GPUs for 105 s (5 s waiting) -> 810; delivered 600 + 200.
    assert summary["owed_gpu_hours"] == round(810 / 3600, 1)
    assert summary["per_team"] == [
        {
            "allocation": "lab/a",
            "budget_gpus": 4.0,
            "entitlement_fraction": 1.0,
            "owed_gpu_hours": round(810 / 3600, 3),
            "delivered_gpu_hours": round(800 / 3600, 3),
            "delivered_owed_ratio": round(800 / 810, 4),
        }
    ]
    assert summary["delivered_owed_ratio"] == round(800 / 810, 4)
    assert (summary["teams"], summary["teams_at_95pct"], summary["jain_index"]) == (1, 1, 1.0)
    # assigned GPU-seconds: U 1000 + 3200, A 600, B 200 = 5000 of 5600 healthy; U's 4200 unfunded.
    assert summary["availability"] == 1.0
    assert summary["occupancy"] == round(5000 / 5600, 4)
    assert summary["unallocated_share"] == round(4200 / 5000, 4)
    assert (summary["wait_p50_s"], summary["wait_p90_s"]) == (0.0, 4.0)
    waits = {"wait_p50_s": 5.0, "wait_p90_s": 5.0, "funded_wait_p50_s": 5.0, "funded_wait_p90_s": 5.0}
    assert summary["by_class"]["debug"] == {"jobs": 1, **waits, "never_started": 0}
    waits = {"wait_p50_s": 0.0, "wait_p90_s": 0.0, "funded_wait_p50_s": 0.0, "funded_wait_p90_s": 0.0}
    assert summary["by_class"]["batch"] == {"jobs": 2, **waits, "never_started": 0}
    assert (summary["preemptions"], summary["requeues"], summary["requeue_wait_p50_s"]) == (1, 1, 300.0)
    assert summary["lost_gpu_hours"] == round(200 / 3600, 2)
    assert (summary["completed"], summary["never_started"]) == (3, 0)


def test_a_node_failure_requeues_resumable_work_and_lowers_availability():
    """One 2-GPU node fails at t=100 for 200 s; the job (checkpoints every 30 s) loses 10 s.

    It restarts at the repair (t=300, requeue wait 200 s) with 910 s left, ends at t=1210.
    Owed counts only what the healthy cluster could give: 2 x 100 + 0 x 200 + 2 x 910.
    """
    job = SimJob(1, "lab", "alice", 2, 0.0, 1000.0, resumable=True, checkpoint_s=30.0)
    inputs = tiny_input(
        [job],
        nodes=[ClusterNodeSpec("n1", 2, "H100")],
        tree=[BudgetNodeSpec("lab", None, 2.0)],
        seconds=1500.0,
        outages=[NodeOutage("n1", 100.0, 200.0)],
    )

    summary = run_simulation(inputs).summary

    assert summary["availability"] == round(2600 / 3000, 4)
    assert summary["occupancy"] == round(2020 / 2600, 4)
    assert summary["delivered_owed_ratio"] == 1.0
    assert summary["owed_gpu_hours"] == round(2020 / 3600, 1)
    assert (summary["node_failures"], summary["node_failure_ends"]) == (1, 0)
    assert summary["node_failure_lost_gpu_hours"] == round(20 / 3600, 2)
    assert summary["requeue_wait_p50_s"] == 200.0
    assert summary["preemptions"] == 0


def test_passes_run_on_ten_second_ticks_and_only_when_something_changed(preemption_story):
    summary = run_simulation(preemption_story, planner=first_come_first_served).summary

    # U arrives (t=0), A (t=250), B (t=255 -> tick 260), B ends (360), U ends (1000), A ends (550).
    assert summary["passes"] == 6


def test_a_plan_that_overcommits_a_node_is_refused(preemption_story):
    def greedy(snapshot, now, config):
        starts = tuple(Start(w.id, (("n1", w.gpus),), now, True) for w in snapshot.pending)
        return Plan(starts, (), (), (), {}, {})

    with pytest.raises(SimulationError, match="the plan places workload 2 on n1 x2, which has 0 free GPUs"):
        run_simulation(preemption_story, planner=greedy)


def test_only_the_measured_period_counts_after_the_warmup():
    jobs = [SimJob(1, "lab", "alice", 1, 0.0, 50.0), SimJob(2, "lab", "alice", 1, 120.0, 50.0)]
    inputs = replace(
        tiny_input(
            jobs,
            nodes=[ClusterNodeSpec("n1", 1, "H100")],
            tree=[BudgetNodeSpec("lab", None, 1.0)],
            seconds=100,
        ),
        warmup_s=100.0,
    )

    summary = run_simulation(inputs).summary

    assert summary["jobs"] == 1
    assert summary["occupancy"] == 0.5  # job 2 runs 50 of the 100 measured seconds


def test_in_the_priority_world_only_a_higher_class_preempts_even_opportunistic_work(preemption_story):
    same_class = run_simulation(preemption_story, policy="priority").summary
    assert same_class["preemptions"] == 0
    assert same_class["by_class"]["batch"]["wait_p90_s"] == round(0.9 * 750, 1)  # A waits for U: 250 -> 1000

    higher = [replace(job, priority=2) if job.id == 2 else job for job in preemption_story.jobs]
    summary = run_simulation(replace(preemption_story, jobs=tuple(higher)), policy="priority").summary
    assert summary["preemptions"] == 1
