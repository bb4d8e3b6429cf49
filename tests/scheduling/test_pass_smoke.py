from datetime import timedelta

from scheduling.models import Run, SchedulingPass, Workload, WorkloadState
from scheduling.passes import run_pass
from scheduling.services import workload_submit
from tests.scheduling.conftest import T0
from tests.scheduling.fakes import fifo_planner


def test_a_submitted_workload_starts_runs_and_completes(lab):
    result = workload_submit(
        actor=lab.bob,
        cluster=lab.main,
        allocation_path="lab/vision/perception",
        gpus=4,
        metadata={"duration_s": 600},
        now=T0,
    )
    run_pass(cluster_id=lab.main.pk, now=T0 + timedelta(seconds=10), planner=fifo_planner)
    workload = Workload.objects.get(pk=result.workload.pk)
    assert workload.state == WorkloadState.RUNNING
    run_pass(cluster_id=lab.main.pk, now=T0 + timedelta(seconds=700), planner=fifo_planner)
    workload.refresh_from_db()
    assert workload.state == WorkloadState.COMPLETED
    run = Run.objects.get(workload=workload)
    assert run.end_reason == "completed"
    assert SchedulingPass.objects.count() == 2
