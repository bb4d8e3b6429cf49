"""A Slurm site's first hour (issue 18): every job shape researchers submit with plain sbatch,
and what Slurm's own tools tell them. Against the real test cluster (scripts/slurm-cluster.sh).

    labXXXX (32 GPUs) +- vision (20)  +- language (12)      (see test_slurm_end_to_end.py)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from scheduling.backends.base import StartAction
from scheduling.backends.slurm import SlurmBackend, SlurmSettings
from scheduling.backends.slurm_accounts import account_name
from scheduling.models import Decision, PendingReason, Run, SchedulingPass, Workload
from scheduling.passes import run_pass

from .conftest import SLURM_CONF, slurm_command
from .test_slurm_end_to_end import (  # noqa: F401 - lab is a fixture
    _job,
    all_running,
    lab,
    open_run,
    run_nodes,
    sbatch,
    scheduling_pass,
    workload,
)
from .test_slurm_live import stop_controller

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


@pytest.fixture
def site(request):  # noqa: ANN001, ANN201
    """The lab, with the Linux user `nobody` as a member of both teams' Slurm accounts."""
    team = request.getfixturevalue("lab")
    accounts = ",".join(account_name(node.path) for node in (team.vision, team.language))
    slurm_command("sacctmgr", "-i", "add", "user", "nobody", f"account={accounts}", check=False)
    return team


def as_nobody(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    return subprocess.run(("runuser", "-u", "nobody", "--", *args), capture_output=True, text=True,
                          env=env, timeout=20, check=False)  # fmt: skip


def running_refs() -> set[str]:
    return set(slurm_command("squeue", "-h", "-t", "R", "-o", "%i").split())


def test_a_job_already_running_is_adopted_as_running_with_its_submit_time(site):
    job = sbatch(site, site.language, 2)
    time.sleep(1.5)
    # An administrator started it by hand before the portal ever saw it (a busy cluster it joins).
    slurm_command("scontrol", "update", f"JobId={job}", "NodeList=n2", "StartTime=now")
    site.slurm.wait_for_state(job, "RUNNING")

    first = scheduling_pass(site)

    assert (first.status, first.adopted_count, first.error) == ("completed", 1, "")
    adopted, run = workload(site, job), open_run(site, job)
    assert adopted.state == "running" and run_nodes(run) == "n2"
    assert adopted.submitted_at.timestamp() == pytest.approx(_job(site, job).submitted_at, abs=1)
    assert adopted.submitted_at < run.started_at
    assert scheduling_pass(site).status == "completed"
    assert Run.objects.filter(workload=adopted).count() == 1


def test_a_job_the_pass_cannot_read_is_named_on_the_pass_and_the_others_still_start(site):
    jobs = [sbatch(site, site.language, 2) for _ in range(3)]
    broken = jobs[1]
    backend = SlurmBackend.for_cluster(site.cluster)
    real_run = backend.cli.run

    def garbled(*args: str) -> str:  # squeue's record of one job comes back malformed
        output = real_run(*args)
        if args[:2] == ("squeue", "--json"):
            document = json.loads(output)
            for record in document["jobs"]:
                if str(record["job_id"]) == broken:
                    record["tres_req_str"] = 7
            output = json.dumps(document)
        return output

    backend.cli.run = garbled
    outcome = run_pass(cluster_id=site.cluster.pk, backend=backend)

    record = SchedulingPass.objects.get(pk=outcome.pass_id)
    assert record.status == "completed" and f"job {broken}: unreadable squeue record" in record.error
    others = [job for job in jobs if job != broken]
    all_running(site, others)
    assert site.slurm.squeue(broken) == ("PENDING", "")
    assert not Workload.objects.filter(cluster=site.cluster, backend_ref=broken).exists()


def test_a_users_own_hold_survives_passes_shows_who_held_it_and_their_release_works(site):
    job = site.slurm.sbatch(f"--account={account_name(site.language.path)}", "--gres=gpu:1", user="nobody")
    assert as_nobody("scontrol", "hold", job).returncode == 0

    scheduling_pass(site)
    scheduling_pass(site)

    assert site.slurm.squeue(job) == ("PENDING", "")
    held = workload(site, job)
    assert (held.held, held.held_by) == (True, "nobody")
    reason = PendingReason.objects.get(workload=held)
    assert reason.code == "HELD" and "nobody" in reason.message

    released = as_nobody("scontrol", "release", job)
    assert released.returncode == 0, released.stderr
    scheduling_pass(site)
    site.slurm.wait_for_state(job, "RUNNING", timeout=20)
    assert not workload(site, job).held


def test_a_cpu_only_job_passes_through_and_runs(site):
    job = site.slurm.sbatch(f"--account={account_name(site.language.path)}", seconds=30, user="nobody")

    site.slurm.wait_for_state(job, "RUNNING", timeout=20)
    scheduling_pass(site)
    assert not Workload.objects.filter(cluster=site.cluster, backend_ref=job).exists()


def test_time_is_the_maximum_runtime_protection_is_capped_at_it_and_the_estimate_reads_it(site):
    jobs = [sbatch(site, site.language, 8, "--time=5", "--comment=min_runtime=1h") for _ in range(5)]

    scheduling_pass(site)

    runs = list(Run.objects.filter(cluster=site.cluster, ended_at__isnull=True).select_related("workload"))
    assert len(runs) == 4
    for run in runs:
        assert (run.workload.max_runtime_s, run.workload.min_runtime_s) == (300, 300)
        assert run.protected_until - run.started_at == timedelta(seconds=300)
    (waiting,) = Workload.objects.filter(cluster=site.cluster, state="pending")
    assert waiting.backend_ref in jobs
    scheduling_pass(site)  # the running work is now known: the estimate is when the first one must end
    estimate = PendingReason.objects.get(workload=waiting).estimated_start
    first_end = min(run.started_at for run in runs) + timedelta(seconds=300)
    assert estimate is not None and estimate <= first_end + timedelta(seconds=5), PendingReason.objects.get(
        workload=waiting
    ).message


def test_an_array_of_20_one_gpu_tasks_starts_exactly_the_tasks_the_plan_chose(site):
    blockers = [sbatch(site, site.language, 8, "--comment=min_runtime=1h") for _ in range(3)]
    scheduling_pass(site)
    all_running(site, blockers)
    array = site.slurm.sbatch(f"--account={account_name(site.vision.path)}", "--array=1-20", "--gres=gpu:1",
                              seconds=300)  # fmt: skip

    second = scheduling_pass(site)

    tasks = Workload.objects.filter(cluster=site.cluster, backend_ref__startswith=f"{array}_")
    assert tasks.count() == 20 and len({task.submitted_at for task in tasks}) == 1
    started = set(
        Decision.objects.filter(workload__in=tasks, kind="start").values_list(
            "workload__backend_ref", flat=True
        )
    )
    assert len(started) == second.started_count == 8
    site.slurm.wait_for(lambda: running_refs() >= started, what="the started tasks to run")
    time.sleep(3)  # Slurm's own scheduler had time to start more, if anything let it
    assert running_refs() - set(blockers) == started


def test_a_heterogeneous_gpu_job_is_refused_at_submission_with_a_clear_message(site):
    account = f"--account={account_name(site.language.path)}"
    done = as_nobody("sbatch", "--output=/dev/null", "--chdir=/tmp", account, "--gres=gpu:1", ":",
                     account, "--gres=gpu:2", "--wrap=sleep 5")  # fmt: skip

    assert done.returncode != 0
    assert "heterogeneous GPU jobs are not supported" in done.stderr


def test_scontrol_show_job_tells_the_portals_reason_position_and_link(site):
    jobs = [sbatch(site, site.language, 8, "--comment=min_runtime=1h") for _ in range(5)]

    scheduling_pass(site)

    (waiting,) = Workload.objects.filter(cluster=site.cluster, state="pending")
    reason = PendingReason.objects.get(workload=waiting)
    detail = slurm_command("scontrol", "show", "job", waiting.backend_ref)
    assert f"{reason.code} #{reason.position}" in detail
    assert reason.message[:40] in detail
    assert f"/scheduling/workloads/{waiting.pk}/" in detail
    line = slurm_command("squeue", "-h", "-j", waiting.backend_ref, "-o", "%i %u %r").split()
    assert line[:2] == [waiting.backend_ref, "root"] and waiting.backend_ref in jobs


def test_a_preempted_job_that_cannot_resume_is_cancelled_with_the_reason(site):
    plain = [sbatch(site, site.language, 8, "--comment=min_runtime=2s") for _ in range(4)]
    scheduling_pass(site)
    all_running(site, plain)
    time.sleep(2.5)  # past their minimum runtime
    sbatch(site, site.vision, 8, "--comment=min_runtime=1h")

    scheduling_pass(site)

    victim = Decision.objects.get(kind="preempt", workload__cluster=site.cluster).workload
    site.slurm.wait_for_state(victim.backend_ref, "CANCELLED", timeout=20)
    detail = slurm_command("scontrol", "show", "job", victim.backend_ref)
    assert "preempted by the GPU portal" in detail


OPERATOR = os.environ.get("SLURM_OPERATOR", "daemon")  # scripts/slurm-cluster.sh's default


def test_a_non_root_operator_account_runs_the_portals_slurm_calls(site):
    job = sbatch(site, site.language, 2)
    as_operator = SlurmBackend(SlurmSettings(slurm_conf=SLURM_CONF, timeout_s=15, run_as=OPERATOR))

    as_operator.apply([StartAction(workload_id=1, ref=job, attempt=1, placement=(("n3", 2),))])

    assert site.slurm.wait_for_state(job, "RUNNING") == "n3"
    refused = as_nobody("scontrol", "update", f"JobId={job}", "StartTime=now")
    assert refused.returncode != 0, "only root and the operator may move a GPU job's start"


def test_restarting_the_cluster_after_a_controller_crash_keeps_waiting_jobs(site):
    job = sbatch(site, site.language, 1)
    stop_controller()

    script = Path(__file__).resolve().parents[2] / "scripts" / "slurm-cluster.sh"
    done = subprocess.run(["bash", str(script), "start"], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert site.slurm.squeue(job) == ("PENDING", "")
    assert os.path.exists(os.path.join(os.path.dirname(SLURM_CONF), "job_submit.lua"))
