"""Checkpoint intervals from the tools users already use (a Slurm comment key, a Kubernetes
annotation) and the grace period of a preemption (Slurm: SIGTERM, then requeue or cancel later;
Kubernetes: the pods' terminationGracePeriodSeconds), without a live cluster."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from scheduling.backends.base import ActionsRefused, JobState, PreemptAction, SubmitRequest
from scheduling.backends.kubernetes import KubernetesBackend, KubernetesSettings
from scheduling.backends.kubernetes_parse import checkpoint_interval as annotation_checkpoint
from scheduling.backends.slurm import SlurmBackend, SlurmCommandError, observed_state
from scheduling.backends.slurm_parse import checkpoint_interval, parse_comment, parse_squeue
from scheduling.models import Cluster
from scheduling.services.workloads import workload_adopt

from .kubernetes_fake import FakeKubernetes, gpu_node
from .test_kubernetes_backend import assert_schema_valid, native_job, observed, start
from .test_slurm_parse import CapturedSlurm, fixture


@pytest.mark.parametrize(
    ("comment", "seconds"),
    [
        ("min_runtime=2h,resumable=yes,checkpoint=30m", 1800),
        ("checkpoint=1h30m resumable=yes", 5400),
        ("checkpoint=900", 900),
        ("min_runtime=2h", None),
        ("checkpoint=often", None),
        ("checkpoint=0", None),
    ],
)
def test_a_slurm_comment_declares_how_often_the_job_checkpoints(comment, seconds):
    assert checkpoint_interval(parse_comment(comment)) == seconds


@pytest.mark.parametrize(
    ("annotations", "seconds"),
    [
        ({"gpu-portal.io/checkpoint-interval": "30m"}, 1800),
        ({"gpu-portal.io/checkpoint-interval": "soon"}, None),
        ({}, None),
    ],
)
def test_a_kubernetes_annotation_declares_how_often_the_job_checkpoints(annotations, seconds):
    assert annotation_checkpoint(annotations) == seconds


def slurm_jobs():  # noqa: ANN201
    return {job.ref: job for job in parse_squeue(fixture("squeue.json"))}


def test_the_slurm_comment_reaches_the_adopted_workload_for_resumable_work_only(db):
    cluster = Cluster.objects.create(name="s", slug="s", backend_kind="slurm")
    backend = SlurmBackend(cli=CapturedSlurm())
    train = slurm_jobs()["1"]  # resumable (min_runtime=2h,resumable=yes in the captured comment)
    keeps = backend.observed_job(replace(train, comment=f"{train.comment},checkpoint=20m"))
    ends = backend.observed_job(
        replace(train, comment="min_runtime=1h,resumable=no,checkpoint=20m", requeue=False)
    )
    now = datetime(2026, 12, 1, tzinfo=UTC)

    assert keeps.checkpoint_interval_s == 1200
    assert workload_adopt(cluster=cluster, job=keeps, now=now).checkpoint_interval_s == 1200
    assert workload_adopt(cluster=cluster, job=replace(ends, ref="9"), now=now).checkpoint_interval_s is None


def test_a_workload_submitted_through_the_portal_carries_its_interval_to_sbatch():
    request = SubmitRequest(workload_id=42, account="lab/vision", user="alice", gpus=4, gpus_per_node=None,
                            name="eval", min_runtime_s=1800, resumable=True, checkpoint_interval_s=1800)  # fmt: skip

    arguments = SlurmBackend(cli=CapturedSlurm()).sbatch_arguments(request)

    comment = next(argument for argument in arguments if argument.startswith("--comment="))
    assert checkpoint_interval(parse_comment(comment.removeprefix("--comment="))) == 1800


def graceful(*actions: PreemptAction):  # noqa: ANN201
    slurm = CapturedSlurm()
    backend = SlurmBackend(cli=slurm)
    backend.apply(list(actions))
    return slurm.commands


def test_a_slurm_preemption_with_grace_marks_the_job_and_sends_sigterm_only():
    commands = graceful(
        PreemptAction(workload_id=5, ref="2", attempt=1, requeue=True, reason="for vision", grace_s=60),
    )

    assert commands == [
        ("scontrol", "update", "JobId=2",
         "AdminComment=portal_hold=1,portal_term=requeue | for vision (SIGTERM sent; stopped after 60 s)"),
        ("scancel", "--signal=TERM", "--full", "2"),
    ]  # fmt: skip


def test_a_signalled_job_reads_as_waiting_or_ended_to_the_portal_while_it_winds_down():
    running = slurm_jobs()["2"]
    assert observed_state(running) is JobState.RUNNING

    requeue = replace(running, admin_comment="portal_hold=1,portal_term=requeue | for vision")
    end = replace(running, admin_comment="portal_term=end | for vision")
    exited = replace(requeue, state="COMPLETED")  # it exited on SIGTERM before the portal requeued it

    assert observed_state(requeue) is JobState.WAITING
    assert observed_state(end) is JobState.CANCELLED
    assert observed_state(exited) is JobState.WAITING


class SignalledSlurm(CapturedSlurm):
    """The captured queue with job 2 signalled (``term``) and job 4 completed; may refuse requeues."""

    def __init__(self, term: str, *, refuse: bool = False) -> None:
        super().__init__()
        self.term, self.refuse = term, refuse

    def run(self, *args: str) -> str:
        if args[0] == "squeue":
            import json

            document = json.loads(fixture("squeue.json"))
            for job in document["jobs"]:
                if job["job_id"] == 2:
                    job["admin_comment"] = f"portal_term={self.term} | for vision"
            return json.dumps(document)
        if self.refuse and args[:2] == ("scontrol", "requeuehold"):
            self.commands.append(args)
            raise SlurmCommandError("scontrol requeuehold: Job is pending execution")
        return super().run(*args)


def test_after_the_grace_the_signalled_job_is_requeued_and_held_or_cancelled():
    for term, requeue, last in (
        ("requeue", True, ("scontrol", "requeuehold", "2")),
        ("end", False, ("scancel", "2")),
    ):
        slurm = SignalledSlurm(term)
        SlurmBackend(cli=slurm).finish_preemptions(
            [PreemptAction(workload_id=5, ref="2", attempt=1, requeue=requeue)]
        )
        assert slurm.commands[-1] == last, term
    gone = SignalledSlurm("end")
    SlurmBackend(cli=gone).finish_preemptions(
        [PreemptAction(workload_id=9, ref="99", attempt=1, requeue=False)]
    )
    assert gone.commands == []  # Slurm no longer knows it: nothing left to stop


def test_a_refused_finish_is_reported_so_that_the_next_pass_tries_again():
    slurm = SignalledSlurm("requeue", refuse=True)

    with pytest.raises(ActionsRefused) as refused:
        SlurmBackend(cli=slurm).finish_preemptions(
            [PreemptAction(workload_id=5, ref="2", attempt=1, requeue=True)]
        )

    assert set(refused.value.refused) == {5}


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    server = FakeKubernetes().start()
    for name in ("n1", "n2"):
        server.add_node(gpu_node(name))
    yield server
    server.stop()
    for manifest in server.written:
        assert_schema_valid(manifest)


@pytest.fixture
def backend(fake) -> KubernetesBackend:  # noqa: ANN001
    return KubernetesBackend(KubernetesSettings(host=fake.url, timeout_s=3))


def test_a_kubernetes_job_the_portal_creates_carries_the_grace_and_the_interval(fake, backend):
    request = SubmitRequest(workload_id=42, account="lab/vision", user="alice", gpus=4, gpus_per_node=None,
                            name="eval", min_runtime_s=1800, resumable=True, checkpoint_interval_s=1800, grace_s=60)  # fmt: skip

    ref = backend.submit(request)

    job = fake.job(ref)
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 60
    assert observed(backend, ref).checkpoint_interval_s == 1800


def test_a_native_job_declares_its_interval_and_is_deleted_with_the_grace(fake, backend):
    fake.create_job(native_job("train", annotations={"gpu-portal.io/checkpoint-interval": "45m"}))
    assert observed(backend, "default/train").checkpoint_interval_s == 2700
    start(backend, "default/train", ("n1", 8))

    backend.apply([PreemptAction(workload_id=1, ref="default/train", attempt=1, requeue=False, grace_s=60)])

    assert fake.deletes == [
        ("default/train", {"gracePeriodSeconds": "60", "propagationPolicy": "Background"})
    ]
