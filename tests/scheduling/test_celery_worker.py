"""The live scheduler on a real Celery worker process and the real Redis broker (marker ``celery``).

Workloads go in through the API; passes run in the worker (never eagerly); the test only enqueues
passes and reads the database, like beat and the pages would.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from rest_framework.test import APIClient

from scheduling.models import (
    AllocationHour,
    Decision,
    PendingReason,
    Run,
    SchedulingPass,
    SimulatedJob,
    Workload,
    WorkloadState,
)
from scheduling.tasks import run_scheduling_pass
from tests.scheduling.conftest import build_lab
from tests.scheduling.processes import kill, start, wait_for

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def start_worker(queue: str):  # noqa: ANN201
    broker = settings.CELERY_BROKER_URL
    celery = str(Path(sys.executable).with_name("celery"))
    return start(
        [celery, "-A", "portal", "worker", "--pool", "solo", "-Q", queue, "-n", f"{queue}-{uuid.uuid4().hex[:4]}@%h",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
        REDIS_URL=broker, CELERY_BROKER_URL=broker,
    )  # fmt: skip


@pytest.fixture
def worker():  # noqa: ANN201
    """A Celery worker process on its own queue of the real Redis broker; killed afterwards."""
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs REDIS_URL (the real Redis broker); .ci/run sets it")
    queue = f"test-passes-{uuid.uuid4().hex[:8]}"
    process = start_worker(queue)
    yield process, queue
    kill(process)
    connections.close_all()


def submit(user, allocation: str, gpus: int, **extra: object) -> int:  # noqa: ANN001
    client = APIClient()
    client.force_authenticate(user)
    body = {"cluster": "main", "allocation": allocation, "gpus": gpus, **extra}
    response = client.post("/api/v1/workloads/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def passes_until(condition, *, worker, cluster_id: int, what: str, timeout: float = 90) -> None:  # noqa: ANN001
    """Queue a pass every half second (as beat would, faster) until the condition holds."""
    process, queue = worker

    def tick() -> bool:
        run_scheduling_pass.apply_async(args=[cluster_id], queue=queue, expires=5)
        time.sleep(0.4)
        return condition()

    wait_for(tick, timeout=timeout, what=what, process=process)


def states(ids: list[int]) -> list[str]:
    return [Workload.objects.get(pk=pk).state for pk in ids]


def test_workloads_submitted_through_the_api_run_complete_and_are_preempted_for_an_under_served_allocation(
    worker,
):
    lab = build_lab()
    cluster_id = lab.main.pk
    hogs = [submit(lab.dave, "lab/language", 8, resumable=True, min_runtime_s=1, metadata={"duration_s": 600})
            for _ in range(4)]  # fmt: skip
    passes_until(lambda: states(hogs) == ["running"] * 4, worker=worker, cluster_id=cluster_id,
                 what="the language workloads to start")  # fmt: skip
    newcomer = submit(lab.bob, "lab/vision/perception", 8, name="eval", metadata={"duration_s": 3})
    passes_until(lambda: states([newcomer]) == ["completed"], worker=worker, cluster_id=cluster_id,
                 what="the perception workload to preempt its way in, run and complete")  # fmt: skip

    preempted = Run.objects.get(end_reason="preempted")
    victim = Workload.objects.get(pk=preempted.workload_id)
    assert victim.allocation == lab.language and victim.requeue_count == 1
    newcomer_run = Run.objects.get(workload_id=newcomer)
    assert newcomer_run.end_reason == "completed" and newcomer_run.attempt == 1
    assert newcomer_run.started_at >= preempted.ended_at  # it ran on the GPUs the victim gave back
    # The victim went back to pending with a reason, and restarts once the GPUs are free again.
    passes_until(lambda: states([victim.pk]) == ["running"], worker=worker, cluster_id=cluster_id,
                 what="the requeued workload to restart")  # fmt: skip
    restart = Run.objects.get(workload=victim, attempt=2)
    assert restart.wait_s >= 0 and restart.end_reason == ""
    assert not PendingReason.objects.filter(workload=victim).exists()
    assert Run.objects.filter(ended_at__isnull=True).count() == 4  # never more GPUs than the cluster has

    used = {row.allocation_id: 0.0 for row in AllocationHour.objects.all()}
    for row in AllocationHour.objects.all():
        used[row.allocation_id] += row.used_gpu_s
    assert used[lab.perception.pk] == pytest.approx(8 * newcomer_run_seconds(newcomer_run), rel=0.01)
    assert used[lab.language.pk] > 0
    assert SchedulingPass.objects.filter(status="completed").count() >= 3
    assert not SchedulingPass.objects.filter(status="failed").exists()


def newcomer_run_seconds(run: Run) -> float:
    return (run.ended_at - run.started_at).total_seconds()


def test_a_pending_workload_gets_a_reason_from_the_worker(worker):
    lab = build_lab()
    big = submit(lab.oscar, "lab/language", 32, min_runtime_s=3600, metadata={"duration_s": 600})
    waiting = submit(lab.bob, "lab/vision/perception", 8, metadata={"duration_s": 600})
    # A pass writes reasons before it dispatches its starts: wait for the pass to complete too.
    passes_until(lambda: PendingReason.objects.filter(workload_id=waiting).exists()
                 and SchedulingPass.objects.filter(cluster_id=lab.main.pk, status="completed").exists(),
                 worker=worker, cluster_id=lab.main.pk, what="a completed pass that explains the queued workload")  # fmt: skip
    assert states([big, waiting]) == [WorkloadState.RUNNING, WorkloadState.PENDING]
    reason = PendingReason.objects.get(workload_id=waiting)
    assert reason.position == 1 and reason.message


def test_a_worker_killed_mid_pass_loses_nothing_and_a_new_worker_finishes_the_work(worker):
    process, queue = worker
    lab = build_lab()
    lab.main.backend_settings = {"apply_delay_s": 60}  # the pass hangs in dispatch, decisions persisted
    lab.main.save()
    ids = [submit(lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 600}) for _ in range(3)]
    run_scheduling_pass.apply_async(args=[lab.main.pk], queue=queue)
    wait_for(lambda: Decision.objects.filter(kind="start").count() == 3, timeout=60, process=process,
             what="the worker's pass to persist its decisions")  # fmt: skip
    kill(process)
    assert states(ids) == ["pending"] * 3 and not SimulatedJob.objects.exists()
    lab.main.backend_settings = {}
    lab.main.save()
    replacement = start_worker(queue)
    try:
        passes_until(lambda: states(ids) == ["running"] * 3, worker=(replacement, queue), cluster_id=lab.main.pk,
                     what="a new worker's pass to start the work")  # fmt: skip
    finally:
        kill(replacement)
    assert Run.objects.count() == 3 and set(Run.objects.values_list("attempt", flat=True)) == {1}
    assert sorted(SimulatedJob.objects.values_list("attempt", flat=True)) == [1, 1, 1]
    assert SchedulingPass.objects.filter(status="failed", error__startswith="interrupted").count() == 1


def test_the_daily_history_prune_runs_on_the_worker_and_keeps_what_the_pages_need(worker):
    from datetime import timedelta

    from django.utils import timezone

    from portal.models import RollupWatermark
    from portal.tasks import prune_history

    assert settings.CELERY_BEAT_SCHEDULE["prune-history"]["task"] == prune_history.name
    process, queue = worker
    lab = build_lab()
    long_ago = timezone.now() - timedelta(days=settings.HISTORY_RETENTION_DAYS + 5)
    old = [
        SchedulingPass.objects.create(cluster=lab.main, started_at=long_ago, finished_at=long_ago)
        for _ in range(3)
    ]
    latest = [
        SchedulingPass.objects.create(cluster=lab.main, started_at=long_ago, finished_at=long_ago)
        for _ in range(2)
    ]
    RollupWatermark.objects.create(cluster=lab.main, last_pass_id=latest[-1].pk)
    prune_history.apply_async(queue=queue)
    wait_for(lambda: SchedulingPass.objects.count() == 2, timeout=60, process=process,
             what="the worker to prune the three old passes")  # fmt: skip
    assert not SchedulingPass.objects.filter(pk__in=[p.pk for p in old]).exists()
    assert set(SchedulingPass.objects.values_list("pk", flat=True)) == {p.pk for p in latest}
