"""Owners resubmit ended work; goodput, lost work by cause, waits per submission and per size band.

Every number here is computed by hand. A scripted planner (first come first served, plus one
preemption at a chosen time) makes the preemptions, so the engine's bookkeeping is what is tested.
"""

from __future__ import annotations

import pytest

from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec, Plan, Preemption
from scheduling.simulator import NodeOutage, SimJob, run_simulation
from scheduling.simulator.result import size_band
from tests.simulator.standin import first_come_first_served, tiny_input

HOUR = 3600.0
TREE = (BudgetNodeSpec("lab", None, 4.0), BudgetNodeSpec("lab/a", "lab", 4.0))


def preempting_at(at: float, victim: int):
    """First come first served, and at the first pass at or after ``at`` ``victim`` is preempted
    (requeued if it is resumable) before the pass's starts are chosen."""

    def planner(snapshot, now, config):
        running = {workload.id: workload for workload in snapshot.running}
        if now < at or victim not in running:
            return first_come_first_served(snapshot, now, config)
        target = running[victim]
        freed = tuple(workload for workload in snapshot.running if workload.id != victim)
        rest = first_come_first_served(type(snapshot)(**{**_fields(snapshot), "running": freed}), now, config)
        preemption = Preemption(victim, target.resumable, 0, "scripted")
        return Plan(rest.starts, (preemption,), (), (), {}, {})

    return planner


def _fields(snapshot) -> dict:
    return {name: getattr(snapshot, name) for name in snapshot.__dataclass_fields__}


@pytest.fixture
def killed_job():
    """One 4-GPU node, all of it ``lab/a``'s.

    t=0      J1 (4 GPUs, 10 h of work, not resumable) starts.
    t=2 h    J2 (1 GPU, 1 h) arrives; the pass preempts J1 (8 GPU-hours lost) and starts J2.
    t=2 h 5 min  J1's owner resubmits it (delay 300 s); it waits for J2's GPU.
    t=3 h    J2 ends; J1 starts again with all 10 h of work (resubmission wait 3,300 s).
    t=13 h   J1 completes. Horizon 50,000 s (13.9 h).
    """
    jobs = [
        SimJob(1, "lab/a", "alice", 4, 0.0, 10 * HOUR),
        SimJob(2, "lab/a", "bob", 1, 2 * HOUR, HOUR),
    ]
    return tiny_input(jobs, nodes=[ClusterNodeSpec("n1", 4, "H100")], seconds=50_000.0, tree=TREE)


def test_a_preempted_job_is_resubmitted_with_its_full_duration_and_its_demand_stays_owed(killed_job):
    summary = run_simulation(killed_job, planner=preempting_at(2 * HOUR, 1)).summary

    assert (summary["jobs_completed"], summary["resubmissions"], summary["preemptions"]) == (2, 1, 1)
    # owed: J1's 4 GPUs from 0 to its completion at 13 h, also while it waited to be resubmitted
    assert summary["owed_gpu_hours"] == 52.0
    # delivered: J1 2 h x 4, J2 1 h x 1, J1 again 10 h x 4
    assert summary["delivered_gpu_hours"] == 49.0
    assert summary["delivered_owed_ratio"] == round(49 / 52, 4)
    assert summary["lost_gpu_hours_by_cause"] == {"preemption": 8.0, "node_failure": 0.0}
    assert summary["lost_gpu_hours"] == 8.0
    assert (summary["assigned_gpu_hours"], summary["goodput_gpu_hours"]) == (49.0, 41.0)
    assert summary["preemptions_per_1000_gpu_hours"] == round(1 / 0.049, 3)
    # waits per submission: J1 0 s and 3,300 s (resubmission -> start), J2 0 s
    assert summary["wait_p90_s"] == round(0.8 * 3300, 1)
    assert summary["by_size"]["2-7"] == {
        "jobs": 1,
        "wait_p50_s": 1650.0,
        "wait_p90_s": 2970.0,
        "funded_wait_p50_s": 1650.0,
        "funded_wait_p90_s": 2970.0,
        "never_started": 0,
    }
    # contended only while J1 (4) and J2 (1) want more than the node's 4 GPUs: 2 h 5 min -> 3 h,
    # with 1 of 4 GPUs busy (J1 waiting to be resubmitted is not requested: 2 h -> 2 h 5 min)
    assert summary["occupancy_when_contended"] == 0.25
    assert summary["contended_share"] == round(4 * 3300 / (4 * 50_000), 4)


def test_without_resubmission_the_preempted_job_stays_ended_and_owed_shrinks_with_it(killed_job):
    summary = run_simulation(killed_job, planner=preempting_at(2 * HOUR, 1), resubmit_delay_s=None).summary

    assert (summary["jobs_completed"], summary["resubmissions"], summary["completed"]) == (1, 0, 1)
    # owed and delivered: J1 2 h x 4, J2 1 h x 1: the policy that killed J1 looks perfect
    assert (summary["owed_gpu_hours"], summary["delivered_gpu_hours"]) == (9.0, 9.0)
    assert summary["delivered_owed_ratio"] == 1.0
    assert summary["lost_gpu_hours_by_cause"] == {"preemption": 8.0, "node_failure": 0.0}
    assert (summary["assigned_gpu_hours"], summary["goodput_gpu_hours"]) == (9.0, 1.0)
    assert summary["resubmit_delay_s"] is None


def test_the_resubmission_delay_is_a_knob(killed_job):
    summary = run_simulation(
        killed_job, planner=preempting_at(2 * HOUR, 1), resubmit_delay_s=2 * HOUR
    ).summary

    # resubmitted at 4 h, J2's GPU already free: starts at once and completes at 14 h, after the horizon
    assert (summary["resubmissions"], summary["jobs_completed"]) == (1, 1)
    assert summary["by_size"]["2-7"]["wait_p90_s"] == 0.0
    assert summary["resubmit_delay_s"] == 2 * HOUR


def test_a_node_failure_that_ends_work_counts_its_loss_apart_and_the_job_is_resubmitted():
    """A 2-GPU node fails at t=100 for 200 s under J (not resumable, 1,000 s): 200 GPU-s lost.

    J is resubmitted at t=400 (the node is back since t=300), starts at once, completes at t=1400.
    """
    job = SimJob(1, "lab", "alice", 2, 0.0, 1000.0)
    inputs = tiny_input(
        [job],
        nodes=[ClusterNodeSpec("n1", 2, "H100")],
        tree=[BudgetNodeSpec("lab", None, 2.0)],
        seconds=1800.0,
        outages=[NodeOutage("n1", 100.0, 200.0)],
    )

    summary = run_simulation(inputs, planner=first_come_first_served).summary

    assert summary["lost_gpu_hours_by_cause"] == {"preemption": 0.0, "node_failure": round(200 / 3600, 2)}
    assert (summary["node_failures"], summary["node_failure_ends"]) == (1, 1)
    assert (summary["resubmissions"], summary["jobs_completed"]) == (1, 1)
    # run 2 x 100 + 2 x 1000 GPU-s, of which the first 200 were lost
    assert summary["goodput_gpu_hours"] == round(2000 / 3600, 1)
    # owed: the job's 2 GPUs at 0-100, 0 healthy GPUs 100-300, 2 GPUs again 300-1400
    assert summary["owed_gpu_hours"] == round((200 + 2200) / 3600, 1)


def test_a_preempted_resumable_job_keeps_its_checkpointed_work_as_goodput():
    """J1 (4 GPUs, 10 h, checkpoints every hour) is preempted at 2.5 h: 2 h were saved, the last
    30 min (2 GPU-hours) lost. J2 (1 GPU, 1 h) takes a GPU; J1 restarts at 3.5 h with 8 h left."""
    jobs = [
        SimJob(1, "lab/a", "alice", 4, 0.0, 10 * HOUR, resumable=True, checkpoint_s=HOUR),
        SimJob(2, "lab/a", "bob", 1, 2.5 * HOUR, HOUR),
    ]
    inputs = tiny_input(jobs, nodes=[ClusterNodeSpec("n1", 4, "H100")], seconds=50_000.0, tree=TREE)

    summary = run_simulation(inputs, planner=preempting_at(2.5 * HOUR, 1)).summary

    assert (summary["requeues"], summary["resubmissions"], summary["jobs_completed"]) == (1, 0, 2)
    assert summary["lost_gpu_hours_by_cause"]["preemption"] == 2.0
    # run: 4 x 2.5 h + 1 h + 4 x 8 h = 43 GPU-hours; kept: all of it but the lost 2
    assert (summary["assigned_gpu_hours"], summary["goodput_gpu_hours"]) == (43.0, 41.0)
    assert summary["requeue_wait_p50_s"] == HOUR


def test_jobs_fall_in_size_bands_with_empty_bands_listed():
    """Nine 8-GPU nodes. At t=0: 1 GPU and 3 GPUs (unfunded) share n01, 8 GPUs take n02; the
    64-GPU job needs eight whole nodes and waits until n01 and n02 are free at t=100."""
    tree = [BudgetNodeSpec("lab", None, 72.0), BudgetNodeSpec("free", None, 0.0)]
    jobs = [
        SimJob(1, "lab", "alice", 1, 0.0, 100.0),
        SimJob(2, "free", "carol", 3, 0.0, 100.0),
        SimJob(3, "lab", "bob", 8, 0.0, 100.0),
        SimJob(4, "lab", "dave", 64, 0.0, 100.0),
    ]
    nodes = [ClusterNodeSpec(f"n{i:02d}", 8, "H100") for i in range(1, 10)]
    inputs = tiny_input(jobs, nodes=nodes, tree=tree, seconds=1000.0)

    by_size = run_simulation(inputs, planner=first_come_first_served).summary["by_size"]

    assert list(by_size) == ["1", "2-7", "8-63", "64+"]
    assert [by_size[band]["jobs"] for band in by_size] == [1, 1, 1, 1]
    assert by_size["64+"]["wait_p90_s"] == by_size["64+"]["funded_wait_p90_s"] == 100.0
    assert by_size["2-7"]["wait_p90_s"] == 0.0
    assert by_size["2-7"]["funded_wait_p90_s"] is None  # the 3-GPU job is unfunded


@pytest.mark.parametrize(
    ("gpus", "band"), [(1, "1"), (2, "2-7"), (7, "2-7"), (8, "8-63"), (63, "8-63"), (64, "64+"), (512, "64+")]
)
def test_size_band_edges(gpus, band):
    assert size_band(SimJob(1, "lab", "alice", gpus, 0.0, 1.0)) == band


def test_never_started_counts_per_class_and_band():
    """One 2-GPU node: J1 holds it past the horizon; J2 (debug, 1 GPU) never gets a GPU."""
    tree = [BudgetNodeSpec("lab", None, 2.0)]
    jobs = [
        SimJob(1, "lab", "alice", 2, 0.0, 5000.0),
        SimJob(2, "lab", "bob", 1, 10.0, 60.0, workload_class="debug"),
    ]
    inputs = tiny_input(jobs, nodes=[ClusterNodeSpec("n1", 2, "H100")], tree=tree, seconds=1000.0)

    summary = run_simulation(inputs, planner=first_come_first_served).summary

    assert summary["by_class"]["debug"]["never_started"] == 1
    assert summary["by_size"]["1"]["never_started"] == 1
    assert summary["by_size"]["2-7"]["never_started"] == 0
    assert summary["funded_debug_interactive_wait_p90_s"] == 990.0  # waited until the horizon


def test_the_real_policy_ends_unfunded_work_for_funded_work_and_its_owner_resubmits_it():
    """One 4-GPU node, all of it ``lab/a``'s. U (unfunded, 4 GPUs, 1,000 s, not resumable) starts
    at t=0; A (2 GPUs, 300 s) arrives at t=250 and fair share ends U for it (1,000 GPU-s lost).
    U's owner resubmits it at t=550, as A ends: U runs all its 1,000 s again, to t=1550."""
    tree = [
        BudgetNodeSpec("lab", None, 4.0),
        BudgetNodeSpec("lab/a", "lab", 4.0),
        BudgetNodeSpec("lab/free", "lab", 0.0),
    ]
    jobs = [
        SimJob(1, "lab/free", "carol", 4, 0.0, 1000.0),
        SimJob(2, "lab/a", "alice", 2, 250.0, 300.0, min_runtime_s=300.0),
    ]
    inputs = tiny_input(jobs, nodes=[ClusterNodeSpec("n1", 4, "H100")], tree=tree, seconds=1600.0)

    summary = run_simulation(inputs, policy="fairshare").summary

    assert (summary["preemptions"], summary["resubmissions"], summary["jobs_completed"]) == (1, 1, 2)
    assert summary["funded_jobs_completed"] == 1  # A; U is unfunded
    assert summary["lost_gpu_hours_by_cause"]["preemption"] == round(1000 / 3600, 2)
    assert summary["goodput_gpu_hours"] == round((1000 + 600 + 4000 - 1000) / 3600, 1)
    assert summary["wait_p90_s"] == 0.0  # each submission started at once
