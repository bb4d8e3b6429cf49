"""The pass end to end on the simulated backend with the real policy, on an injected clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.backends.simulated import simulated_native_submit, simulated_node_set_health
from scheduling.models import (
    AllocationHour,
    Decision,
    PassStatus,
    PendingReason,
    Run,
    SchedulingPass,
    SimulatedJob,
    UtilisationSample,
    Workload,
    WorkloadState,
)
from scheduling.passes import run_pass
from scheduling.services import IllegalTransition, workload_submit, workload_transition
from tests.scheduling.conftest import T0


def at(seconds: float):  # noqa: ANN201
    return T0 + timedelta(seconds=seconds)


def submit(lab, user, allocation: str, gpus: int, *, seconds: float = 0, **extra: object) -> Workload:  # noqa: ANN001
    return workload_submit(actor=user, cluster=lab.main, allocation_path=allocation, gpus=gpus, now=at(seconds),
                           **extra).workload  # fmt: skip


def pass_at(lab, seconds: float) -> SchedulingPass:  # noqa: ANN001
    outcome = run_pass(cluster_id=lab.main.pk, now=at(seconds), memory=lab.memory)
    assert outcome.ran
    return SchedulingPass.objects.get(pk=outcome.pass_id)


def state_of(workload: Workload) -> str:
    workload.refresh_from_db()
    return workload.state


def test_a_workload_starts_runs_for_its_duration_and_completes(lab):
    workload = submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 1800})
    first = pass_at(lab, 10)
    assert state_of(workload) == WorkloadState.RUNNING
    assert first.started_count == 1 and first.status == PassStatus.COMPLETED
    assert first.reconcile_ms > 0 and first.snapshot_ms > 0 and first.plan_ms > 0 and first.persist_ms > 0
    pass_at(lab, 1000)
    assert state_of(workload) == WorkloadState.RUNNING
    pass_at(lab, 1900)
    assert state_of(workload) == WorkloadState.COMPLETED
    run = Run.objects.get(workload=workload)
    assert (run.end_reason, run.attempt, run.wait_s) == ("completed", 1, 10.0)
    assert run.ended_at == at(1810)


def test_usage_is_rolled_up_into_hourly_buckets_as_the_run_goes(lab):
    submit(lab, lab.bob, "lab/vision/perception", 8, metadata={"duration_s": 5400})
    for seconds in (10, 1800, 3600 + 60, 5500):
        pass_at(lab, seconds)
    hours = {row.hour: row for row in AllocationHour.objects.filter(allocation=lab.perception)}
    # The run lasted 09:00:10 -> 10:30:10: 3590 s in the first hour, 1810 s in the second.
    assert hours[at(0)].used_gpu_s == pytest.approx(8 * 3590)
    assert hours[at(3600)].used_gpu_s == pytest.approx(8 * 1810)
    assert hours[at(0)].delivered_gpu_s == pytest.approx(8 * 3590)
    assert hours[at(0)].owed_gpu_s > 0


def test_an_under_served_allocation_preempts_resumable_work_past_its_minimum_runtime(lab):
    hogs = [
        submit(
            lab,
            lab.dave,
            "lab/language",
            8,
            resumable=True,
            min_runtime_s=600,
            metadata={"duration_s": 86400},
        )
        for _ in range(4)
    ]
    pass_at(lab, 10)
    assert [state_of(h) for h in hogs] == [WorkloadState.RUNNING] * 4
    newcomer = submit(lab, lab.bob, "lab/vision/perception", 8, seconds=300, metadata={"duration_s": 600})
    pass_at(lab, 310)  # the hogs are still protected
    assert state_of(newcomer) == WorkloadState.PENDING
    assert PendingReason.objects.get(workload=newcomer).code in {"PROTECTED_WORK", "WAITING_FOR_GPUS"}
    for seconds in (700, 710, 720):
        pass_at(lab, seconds)
    assert state_of(newcomer) == WorkloadState.RUNNING
    preempted = Run.objects.filter(end_reason="preempted")
    assert preempted.count() == 1
    victim = preempted.get().workload
    assert state_of(victim) == WorkloadState.PENDING  # resumable: requeued, same submit time
    assert victim.requeue_count == 1 and victim.submitted_at == at(0)
    assert PendingReason.objects.filter(workload=victim).exists()


def test_a_node_failure_requeues_resumable_work_and_ends_the_rest(lab):
    keeps = submit(lab, lab.bob, "lab/vision/perception", 8, resumable=True, metadata={"duration_s": 86400})
    loses = submit(lab, lab.dave, "lab/language", 8, metadata={"duration_s": 86400})
    pass_at(lab, 10)
    nodes = {w.pk: Run.objects.get(workload=w).placement[0][0] for w in (keeps, loses)}
    for node in nodes.values():
        simulated_node_set_health(cluster=lab.main, name=node, healthy=False, reason="DRAIN: bad GPU")
    pass_at(lab, 20)
    assert state_of(loses) == WorkloadState.FAILED
    assert Run.objects.get(workload=loses).end_reason == "node_failure"
    assert Run.objects.get(workload=keeps, attempt=1).end_reason == "node_failure"
    # Requeued by reconcile, restarted by the same pass's plan on a healthy node:
    assert state_of(keeps) == WorkloadState.RUNNING and keeps.requeue_count == 1
    assert Run.objects.get(workload=keeps, attempt=2).placement[0][0] not in nodes.values()


def test_a_job_that_fails_ends_its_workload_as_failed(lab):
    workload = submit(
        lab, lab.bob, "lab/vision/perception", 2, metadata={"duration_s": 900, "fail_after_s": 60}
    )
    pass_at(lab, 10)
    pass_at(lab, 100)
    assert state_of(workload) == WorkloadState.FAILED
    assert Run.objects.get(workload=workload).end_reason == "failed"


def test_a_job_submitted_natively_to_the_backend_is_adopted_and_scheduled(lab):
    simulated_native_submit(cluster=lab.main, ref="native-1", account="lab/language", user="dave", gpus=4,
                            duration_s=600, min_runtime_s=300, resumable=True)  # fmt: skip
    first = pass_at(lab, 10)
    adopted = Workload.objects.get(backend_ref="native-1")
    assert first.adopted_count == 1
    assert (adopted.allocation, adopted.owner, adopted.source) == (lab.language, lab.dave, "native")
    assert adopted.state == WorkloadState.RUNNING
    pass_at(lab, 700)
    assert state_of(adopted) == WorkloadState.COMPLETED


def test_running_work_reports_utilisation_samples(lab):
    workload = submit(
        lab, lab.bob, "lab/vision/perception", 2, metadata={"duration_s": 3600, "utilisation": 42}
    )
    pass_at(lab, 10)
    pass_at(lab, 100)
    sample = UtilisationSample.objects.get(workload=workload)
    assert 37 <= sample.gpu_utilisation <= 47


def test_a_cancelled_running_workload_is_stopped_by_the_next_pass(lab):
    from scheduling.services import workload_cancel

    workload = submit(lab, lab.bob, "lab/vision/perception", 2, metadata={"duration_s": 3600})
    pass_at(lab, 10)
    workload_cancel(workload=workload, actor=lab.bob, now=at(50))
    assert state_of(workload) == WorkloadState.RUNNING  # until the backend has stopped it
    pass_at(lab, 60)
    assert state_of(workload) == WorkloadState.CANCELLED
    assert Run.objects.get(workload=workload).end_reason == "cancelled"
    assert SimulatedJob.objects.get(workload_id=workload.pk).state == "cancelled"


def test_an_unavailable_backend_explains_every_pending_workload_and_loses_nothing(lab):
    workloads = [submit(lab, lab.bob, "lab/vision/perception", 8) for _ in range(5)]
    lab.main.backend_settings = {"unavailable": True}
    lab.main.save()
    record = pass_at(lab, 10)
    assert record.status == PassStatus.BACKEND_UNAVAILABLE
    assert set(PendingReason.objects.values_list("code", flat=True)) == {"BACKEND_UNAVAILABLE"}
    assert "did not answer" in PendingReason.objects.first().message
    lab.main.backend_settings = {}
    lab.main.save()
    pass_at(lab, 20)
    assert sorted(state_of(w) for w in workloads) == ["pending"] + ["running"] * 4
    assert PendingReason.objects.get().code != "BACKEND_UNAVAILABLE"


def test_held_work_does_not_start_and_says_who_held_it(lab):
    from scheduling.services import workload_hold

    workload = submit(lab, lab.bob, "lab/vision/perception", 2)
    workload_hold(workload=workload, actor=lab.alice, note="maintenance", now=at(5))
    pass_at(lab, 10)
    assert state_of(workload) == WorkloadState.PENDING
    reason = PendingReason.objects.get(workload=workload)
    assert reason.code == "HELD" and "alice" in reason.message


def test_the_state_machine_refuses_illegal_moves(lab):
    workload = submit(lab, lab.bob, "lab/vision/perception", 2)
    with pytest.raises(IllegalTransition):
        workload_transition(workload=workload, to=WorkloadState.COMPLETED, now=at(1))
    workload_transition(workload=workload, to=WorkloadState.CANCELLED, now=at(1))
    with pytest.raises(IllegalTransition):
        workload_transition(workload=workload, to=WorkloadState.RUNNING, now=at(2))


def test_decisions_are_written_before_they_are_dispatched(lab):
    submit(lab, lab.bob, "lab/vision/perception", 2)
    pass_at(lab, 10)
    decision = Decision.objects.get(kind="start")
    assert decision.dispatched_at == at(10) and decision.attempt == 1 and not decision.superseded


class RefusingBackend:
    """The simulated backend, except that it refuses to create one particular job."""

    def __init__(self, lab, refused_id: int) -> None:  # noqa: ANN001
        from scheduling.backends.simulated import SimulatedBackend

        self.inner = SimulatedBackend(lab.main, clock=at(10).timestamp)
        self.refused_id = refused_id
        self.name = "refusing"

    def observe(self):  # noqa: ANN201
        return self.inner.observe()

    def apply(self, actions) -> None:  # noqa: ANN001
        self.inner.apply(actions)

    def submit(self, request) -> str:  # noqa: ANN001
        if request.workload_id == self.refused_id:
            raise RuntimeError("sbatch: error: Invalid account")
        return self.inner.submit(request)


def test_a_job_the_backend_refuses_fails_alone_and_the_pass_goes_on(lab):
    refused = submit(lab, lab.bob, "lab/vision/perception", 2)
    fine = submit(lab, lab.bob, "lab/vision/perception", 2)
    outcome = run_pass(cluster_id=lab.main.pk, now=at(10), backend=RefusingBackend(lab, refused.pk))
    assert outcome.status == PassStatus.COMPLETED
    assert state_of(refused) == WorkloadState.FAILED
    assert "Invalid account" in refused.metadata["submit_error"]
    assert state_of(fine) == WorkloadState.RUNNING


def test_the_snapshot_reads_every_field_the_policy_expects_of_a_pending_workload(lab):
    from scheduling.policy import PendingWorkload
    from scheduling.snapshot import _PENDING_COLUMNS, snapshot_read

    assert tuple(_PENDING_COLUMNS) == PendingWorkload.__slots__  # else the slow path is in use
    workload = submit(lab, lab.bob, "lab/vision/perception", 2, workload_class="debug", resumable=True,
                      min_runtime_s=60, max_runtime_s=600)  # fmt: skip
    (read,) = snapshot_read(cluster=lab.main, now=at(10)).snapshot.pending
    assert read == PendingWorkload(
        id=workload.pk, allocation="lab/vision/perception", user="bob", gpus=2, submitted_at=at(0).timestamp(),
        workload_class="debug", min_runtime_s=60.0, resumable=True, max_runtime_s=600.0,
    )  # fmt: skip
