"""A pass that dies half-way loses no workload and starts nothing twice; the next pass finishes the job."""

from __future__ import annotations

import pytest
from django.db import connections

from scheduling.models import Decision, PassStatus, Run, SchedulingPass, SimulatedJob, Workload, WorkloadState
from scheduling.passes import run_pass
from tests.scheduling.processes import kill, python, wait_for
from tests.scheduling.test_pass import at, pass_at, state_of, submit


class Killed(BaseException):
    """Stands for the process dying: not an Exception, so nothing on the way catches it."""


def _die(*args: object, **kwargs: object) -> None:
    raise Killed


def assert_started_exactly_once(workloads: list[Workload]) -> None:
    for workload in workloads:
        assert state_of(workload) == WorkloadState.RUNNING
        assert Run.objects.filter(workload=workload).count() == 1
        job = SimulatedJob.objects.get(workload_id=workload.pk)
        assert (job.state, job.attempt) == ("running", 1)


def test_a_pass_killed_between_persist_and_dispatch_is_completed_by_the_next(lab, monkeypatch):
    workloads = [
        submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600}) for _ in range(3)
    ]
    monkeypatch.setattr("scheduling.passes.dispatch", _die)
    with pytest.raises(Killed):
        run_pass(cluster_id=lab.main.pk, now=at(10))
    assert Decision.objects.filter(kind="start", dispatched_at__isnull=True).count() == 3
    assert not SimulatedJob.objects.exists()
    assert all(state_of(w) == WorkloadState.PENDING for w in workloads)
    monkeypatch.undo()
    pass_at(lab, 20)
    assert_started_exactly_once(workloads)
    assert Decision.objects.filter(superseded=True).count() == 3


def test_a_pass_killed_after_the_backend_started_work_does_not_start_it_again(lab, monkeypatch):
    workloads = [
        submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600}) for _ in range(3)
    ]
    monkeypatch.setattr("scheduling.dispatch._record_effects", _die)
    with pytest.raises(Killed):
        run_pass(cluster_id=lab.main.pk, now=at(10))
    assert SimulatedJob.objects.filter(state="running").count() == 3  # the backend did start them
    assert all(state_of(w) == WorkloadState.PENDING for w in workloads)  # but we never recorded it
    monkeypatch.undo()
    record = pass_at(lab, 20)
    assert record.runs_opened == 3 and record.started_count == 0
    assert_started_exactly_once(workloads)
    assert all(run.started_at == at(10) for run in Run.objects.all())  # as the backend reported


@pytest.mark.django_db(transaction=True)
def test_a_pass_process_killed_mid_dispatch_loses_nothing_and_the_next_pass_repairs_it():
    from tests.scheduling.conftest import build_lab

    lab = build_lab()
    workloads = [
        submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600}) for _ in range(3)
    ]
    lab.main.backend_settings = {"apply_delay_s": 30}
    lab.main.save()
    child = python(f"from scheduling.passes import run_pass; run_pass(cluster_id={lab.main.pk})")
    try:
        wait_for(lambda: Decision.objects.filter(kind="start").count() == 3, timeout=60,
                 what="the pass to persist its decisions", process=child)  # fmt: skip
    finally:
        kill(child)
    assert SchedulingPass.objects.get().status == PassStatus.RUNNING  # it died mid-pass
    assert not SimulatedJob.objects.exists()
    lab.main.backend_settings = {}
    lab.main.save()
    outcomes = []  # the dead process's claim goes with its connection, a moment after the kill
    wait_for(lambda: outcomes.append(run_pass(cluster_id=lab.main.pk)) or outcomes[-1].ran, timeout=30,
             what="the dead pass's claim to be released")  # fmt: skip
    assert outcomes[-1].status == PassStatus.COMPLETED
    assert SchedulingPass.objects.get(status=PassStatus.FAILED).error.startswith("interrupted")
    assert_started_exactly_once(workloads)
    connections.close_all()
