"""The Slurm adapter against the real test cluster: held submission, pinned starts, requeue, cancel."""

import os
import subprocess
import time

import pytest

from scheduling.backends.base import (
    CancelAction,
    JobState,
    PreemptAction,
    StartAction,
    SubmitRequest,
)

from .conftest import SLURM_CONF, slurm_command

pytestmark = pytest.mark.slurm


def start(slurm, job_id, *placement, attempt=1):
    slurm.backend.apply([StartAction(workload_id=1, ref=job_id, attempt=attempt, placement=placement)])


def test_a_plain_sbatch_never_starts_by_itself(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:2")
    time.sleep(3)  # several of Slurm's scheduling cycles (sched_interval=2)

    assert slurm.squeue(job) == ("PENDING", "")
    assert slurm.observed(job).state is JobState.WAITING


def test_a_started_job_runs_exactly_on_the_node_the_portal_chose(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:2")

    start(slurm, job, ("n3", 2))

    assert slurm.wait_for_state(job, "RUNNING") == "n3"
    observed = slurm.observed(job)
    assert observed.state is JobState.RUNNING and observed.nodes == ("n3",)


def test_a_released_job_waiting_for_its_pinned_node_counts_as_running_there(slurm):
    blocker = slurm.sbatch("--account=lab.nlp", "--gres=gpu:8")
    start(slurm, blocker, ("n1", 8))
    slurm.wait_for_state(blocker, "RUNNING")
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:2")

    start(slurm, job, ("n1", 2))

    time.sleep(2)
    assert slurm.squeue(job)[0] == "PENDING"
    observed = slurm.observed(job)
    assert (observed.state, observed.nodes, observed.started_at) == (JobState.RUNNING, ("n1",), None)


def test_a_user_cannot_start_their_own_gpu_job(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:1", user="nobody")

    slurm_command("runuser", "-u", "nobody", "--", "scontrol", "release", job, check=False)
    moved = subprocess.run(
        ["runuser", "-u", "nobody", "--", "scontrol", "update", f"JobId={job}", "StartTime=now"],
        capture_output=True, text=True, env={**os.environ, "SLURM_CONF": SLURM_CONF}, check=False,
    )  # fmt: skip

    assert moved.returncode != 0
    time.sleep(2)
    assert slurm.squeue(job) == ("PENDING", "")


def test_starting_twice_is_harmless(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:1")
    start(slurm, job, ("n2", 1))
    slurm.wait_for_state(job, "RUNNING")

    start(slurm, job, ("n4", 1))

    assert slurm.squeue(job) == ("RUNNING", "n2")


def test_a_gang_runs_on_the_whole_nodes_it_was_given(slurm):
    job = slurm.sbatch("--account=lab.vision", "--nodes=2", "--gres=gpu:8")

    start(slurm, job, ("n2", 8), ("n4", 8))

    assert slurm.wait_for_state(job, "RUNNING") == "n[2,4]"
    assert slurm.observed(job).nodes == ("n2", "n4")


def test_preempted_resumable_work_waits_held_for_the_portal_and_restarts_where_it_is_sent(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:4", "--requeue", "--comment=min_runtime=0")
    start(slurm, job, ("n1", 4))
    slurm.wait_for_state(job, "RUNNING")

    slurm.backend.apply([PreemptAction(workload_id=1, ref=job, attempt=1, requeue=True)])
    slurm.wait_for_state(job, "PENDING")
    time.sleep(3)
    assert slurm.squeue(job) == ("PENDING", "")
    assert (slurm.observed(job).state, slurm.observed(job).attempt) == (JobState.WAITING, 1)

    start(slurm, job, ("n2", 4), attempt=2)
    assert slurm.wait_for_state(job, "RUNNING", timeout=20) == "n2"
    assert slurm.observed(job).attempt == 2


def test_preempted_work_that_cannot_resume_is_cancelled_and_observed_as_ended(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:4")
    start(slurm, job, ("n1", 4))
    slurm.wait_for_state(job, "RUNNING")

    slurm.backend.apply([PreemptAction(workload_id=1, ref=job, attempt=1, requeue=False)])

    slurm.wait_for_state(job, "CANCELLED")
    observed = slurm.observed(job)
    assert observed.state is JobState.CANCELLED and observed.ended_at >= observed.started_at


def test_a_finished_job_is_observed_as_completed_with_its_run(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:1", seconds=1)
    start(slurm, job, ("n4", 1))

    slurm.wait_for_state(job, "COMPLETED")

    observed = slurm.observed(job)
    assert (observed.state, observed.nodes) == (JobState.COMPLETED, ("n4",))


def test_cancelling_a_waiting_job_ends_it_without_a_run(slurm):
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:1")

    slurm.backend.apply([CancelAction(workload_id=1, ref=job)])

    slurm.wait_for_state(job, "CANCELLED")
    assert slurm.observed(job).started_at is None


def test_a_drained_node_is_observed_unhealthy_with_slurms_reason(slurm):
    slurm_command("scontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=bad gpu")

    nodes = {node.name: node for node in slurm.backend.observe().nodes}

    assert not nodes["n2"].healthy and nodes["n2"].reason == "DRAIN: bad gpu"
    assert [nodes[name].gpus for name in ("n1", "n3", "n4")] == [8, 8, 8]


def test_a_workload_submitted_through_the_portal_is_held_and_carries_its_contract(slurm):
    request = SubmitRequest(
        workload_id=42, account="lab/vision", user="alice", gpus=16, gpus_per_node=8, name="big",
        min_runtime_s=1800, resumable=True, metadata={"command": "sleep 60"},
    )  # fmt: skip

    job = slurm.backend.submit(request)

    time.sleep(1)
    observed = slurm.observed(job)
    assert (observed.workload_id, observed.state, observed.account, observed.user) == (
        42, JobState.WAITING, "lab/vision", "alice",
    )  # fmt: skip
    assert (observed.gpus, observed.gpus_per_node, observed.min_runtime_s, observed.resumable) == (
        16,
        8,
        1800,
        True,
    )


def test_accounting_has_one_run_per_start_of_a_requeued_job(slurm):
    since = time.time() - 1
    job = slurm.sbatch("--account=lab.nlp", "--gres=gpu:1", "--requeue")
    start(slurm, job, ("n1", 1))
    slurm.wait_for_state(job, "RUNNING")
    slurm.backend.apply([PreemptAction(workload_id=1, ref=job, attempt=1, requeue=True)])
    slurm.wait_for_state(job, "PENDING")
    start(slurm, job, ("n3", 1), attempt=2)
    slurm.wait_for_state(job, "RUNNING")

    def runs():
        return [run for run in slurm.backend.runs(since=since) if str(run.job_id) == job]

    slurm.wait_for(lambda: len(runs()) == 2, what="slurmdbd to record the second run")
    assert [(run.state, run.nodes) for run in runs()] == [("REQUEUED", "n1"), ("RUNNING", "n3")]


def stop_controller() -> None:
    pid_file = os.path.join(os.path.dirname(os.path.dirname(SLURM_CONF)), "run", "slurmctld.pid")
    with open(pid_file) as file:
        pid = int(file.read())
    os.kill(pid, 15)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def start_controller(slurm) -> None:
    subprocess.run(["slurmctld"], env={**os.environ, "SLURM_CONF": SLURM_CONF}, check=True)
    slurm.wait_for(lambda: "UP" in slurm_command("scontrol", "ping", check=False), what="slurmctld")


def test_a_start_slurm_refuses_is_reported_and_the_other_actions_still_apply(slurm):
    from scheduling.backends.base import ActionsRefused

    doomed = slurm.sbatch("--account=lab.nlp", "--gres=gpu:2")
    victim = slurm.sbatch("--account=lab.nlp", "--gres=gpu:2")
    start(slurm, victim, ("n2", 2))
    slurm.wait_for_state(victim, "RUNNING")

    with pytest.raises(ActionsRefused) as refused:
        slurm.backend.apply([
            StartAction(workload_id=7, ref=doomed, attempt=1, placement=(("no-such-node", 2),)),
            PreemptAction(workload_id=8, ref=victim, attempt=1, requeue=False),
        ])  # fmt: skip

    assert list(refused.value.refused) == [7] and f"job {doomed}" in refused.value.refused[7]
    assert slurm.observed(doomed).state is JobState.WAITING
    assert slurm.observed(victim).state is not JobState.RUNNING
