"""Which workload a backend job is: a job that names a workload whose backend job is another one
(an ended job left over from another portal database, a user's forged comment) never ends, starts
or takes over that workload."""

from __future__ import annotations

from scheduling.backends.base import ClusterState, JobState, ObservedJob, ObservedNode
from scheduling.models import Run, Workload, WorkloadState
from scheduling.reconcile import reconcile
from scheduling.snapshot import funded_allocation_ids
from tests.scheduling.conftest import T0

NODES = tuple(ObservedNode(name=f"n{index}", gpus=8, gpu_type="A100") for index in range(4))


def observe(lab, *jobs: ObservedJob) -> None:  # noqa: ANN001
    state = ClusterState(observed_at=T0.timestamp(), nodes=NODES, jobs=jobs)
    reconcile(cluster=lab.main, state=state, now=T0, funded_ids=funded_allocation_ids(lab.main))


def native(ref: str, state: JobState = JobState.WAITING, **fields: object) -> ObservedJob:
    return ObservedJob(ref=ref, state=state, account="lab/vision/perception", user="bob", gpus=8, **fields)


def submitted_through_the_api(lab) -> Workload:  # noqa: ANN001
    """A workload the API created and no pass has submitted yet (no backend job, no reference)."""
    return Workload.objects.create(
        cluster=lab.main, allocation=lab.perception, user_name="bob", name="api", gpus=8,
        submitted_at=T0, queued_at=T0, state_changed_at=T0,
    )  # fmt: skip


def test_an_ended_job_naming_a_waiting_workloads_id_does_not_end_it(lab):
    newcomer = native("530")
    observe(lab, newcomer)
    adopted = Workload.objects.get(cluster=lab.main, backend_ref="530")

    stale = ObservedJob(ref="17", state=JobState.CANCELLED, workload_id=adopted.pk, account="lab/vision")
    observe(lab, stale, newcomer)

    adopted.refresh_from_db()
    assert adopted.state == WorkloadState.PENDING
    assert not Run.objects.filter(workload=adopted).exists()


def test_a_job_forging_a_running_workloads_id_is_adopted_as_its_own_workload(lab):
    observe(lab, native("100", JobState.RUNNING, nodes=("n0",), started_at=T0.timestamp() - 60))
    running = Workload.objects.get(cluster=lab.main, backend_ref="100")
    assert running.state == WorkloadState.RUNNING

    forged = native("200", workload_id=running.pk)
    observe(lab, native("100", JobState.RUNNING, nodes=("n0",), started_at=T0.timestamp() - 60), forged)
    observe(lab, native("100", JobState.RUNNING, nodes=("n0",), started_at=T0.timestamp() - 60), forged)

    running.refresh_from_db()
    assert running.state == WorkloadState.RUNNING and Run.objects.get(workload=running).ended_at is None
    assert list(
        Workload.objects.filter(cluster=lab.main, backend_ref="200").values_list("state", flat=True)
    ) == [WorkloadState.PENDING]


def test_a_portal_job_whose_reference_was_never_saved_is_its_workloads_and_saves_the_reference(lab):
    workload = submitted_through_the_api(lab)

    observe(
        lab,
        native("300", JobState.RUNNING, workload_id=workload.pk, nodes=("n1",), started_at=T0.timestamp()),
    )

    workload.refresh_from_db()
    assert workload.state == WorkloadState.RUNNING and workload.backend_ref == "300"
    assert Run.objects.get(workload=workload).placement == [["n1", 0]]
    assert list(Workload.objects.filter(cluster=lab.main, backend_ref="300")) == [workload]  # none adopted


def test_an_ended_job_naming_a_workload_not_yet_submitted_leaves_it_waiting_for_its_own_job(lab):
    workload = submitted_through_the_api(lab)

    observe(
        lab, ObservedJob(ref="17", state=JobState.CANCELLED, workload_id=workload.pk, account="lab/vision")
    )

    workload.refresh_from_db()
    assert workload.state == WorkloadState.PENDING and workload.backend_ref == ""
