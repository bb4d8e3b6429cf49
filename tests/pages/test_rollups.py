"""Folding passes, runs, telemetry and pending reasons into the hourly rollups, once each."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portal.models import ClusterHour, PendingDay, WaitHour
from portal.rollups import rollups_fold
from scheduling.models import EndReason, PendingReason, Run, SchedulingPass, UtilisationSample, Workload
from scheduling.passes import run_pass
from tests.pages.conftest import NOW, client_for


def _workload(lab, **fields) -> Workload:  # noqa: ANN001
    defaults = {"cluster": lab.main, "allocation": lab.perception, "user_name": "bob", "gpus": 8, "state": "pending",
                "state_changed_at": NOW, "submitted_at": NOW - timedelta(hours=2), "queued_at": NOW - timedelta(hours=2)}  # fmt: skip
    return Workload.objects.create(**(defaults | fields))


def _run(workload: Workload, *, start, end=None, wait_s=0.0, reason="") -> Run:  # noqa: ANN001
    return Run.objects.create(workload=workload, cluster=workload.cluster, allocation=workload.allocation, user_name="bob",
                              attempt=workload.runs.count() + 1, gpus=workload.gpus, started_at=start, protected_until=start,
                              ended_at=end, end_reason=reason, wait_s=wait_s)  # fmt: skip


@pytest.fixture
def folded_once(lab):  # noqa: ANN001
    rollups_fold(cluster_id=lab.main.pk, now=NOW - timedelta(minutes=10))
    return lab


def test_health_is_charged_for_the_time_between_two_samples(folded_once):
    rollups_fold(cluster_id=folded_once.main.pk, now=NOW)
    hour = ClusterHour.objects.get(hour=NOW.replace(minute=0))
    assert hour.installed_gpu_s == 32 * 600
    assert hour.healthy_gpu_s == 24 * 600  # one of four nodes is unhealthy


def test_a_long_gap_is_charged_as_fifteen_minutes_not_extrapolated(folded_once):
    rollups_fold(cluster_id=folded_once.main.pk, now=NOW + timedelta(hours=3))
    assert sum(ClusterHour.objects.values_list("installed_gpu_s", flat=True)) == 32 * 900


def test_waits_preemptions_and_telemetry_are_folded_once(folded_once):
    lab = folded_once
    victim = _workload(lab, workload_class="batch", resumable=False, state="preempted")
    _run(
        victim,
        start=NOW - timedelta(minutes=40),
        end=NOW - timedelta(minutes=5),
        wait_s=90,
        reason=EndReason.PREEMPTED,
    )
    SchedulingPass.objects.create(
        cluster=lab.main, started_at=NOW - timedelta(minutes=1), finished_at=NOW, total_ms=80
    )
    UtilisationSample.objects.create(
        workload=victim, cluster=lab.main, at=NOW - timedelta(minutes=6), gpus=8, gpu_utilisation=50
    )

    rollups_fold(cluster_id=lab.main.pk, now=NOW)
    rollups_fold(
        cluster_id=lab.main.pk, now=NOW + timedelta(seconds=5)
    )  # too soon to sample; nothing new to fold

    wait = WaitHour.objects.get(workload_class="batch")
    assert (wait.count, wait.total_wait_s) == (1, 90)
    hour = ClusterHour.objects.get(hour=NOW.replace(minute=0))
    assert (hour.preemptions, hour.requeues, hour.pass_count, hour.pass_max_ms) == (1, 0, 1, 80)
    assert hour.lost_gpu_s == 8 * 35 * 60  # non-resumable: the whole run is lost
    assert hour.busy_gpus / hour.sampled_gpus == 0.5
    assert PendingDay.objects.get(cause="preemption").gpu_s == 8 * 35 * 60


def test_pending_gpus_are_charged_to_the_cause_of_their_reason(folded_once):
    lab = folded_once
    for code in ("FRAGMENTED", "FAIR_SHARE_QUEUED"):
        workload = _workload(lab, gpus=4)
        PendingReason.objects.create(workload=workload, code=code, message="...", updated_at=NOW)
    rollups_fold(cluster_id=lab.main.pk, now=NOW)
    causes = dict(PendingDay.objects.values_list("cause", "gpu_s"))
    assert causes == {"fragmentation": 4 * 600, "waiting": 4 * 600}


def test_a_pass_folds_the_rollups_after_its_transaction_commits_and_records_how_long(
    lab, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome = run_pass(cluster_id=lab.main.pk, now=NOW)
    assert not ClusterHour.objects.filter(pass_count__gt=0).exists(), "nothing is folded before the commit"
    for callback in callbacks:
        callback()
    assert ClusterHour.objects.get(hour=NOW.replace(minute=0)).pass_count == 1
    assert SchedulingPass.objects.get(pk=outcome.pass_id).rollups_ms > 0


def test_saving_a_pass_row_outside_the_pass_service_folds_nothing(lab, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        SchedulingPass.objects.create(cluster=lab.main, started_at=NOW, finished_at=NOW, total_ms=12)
    assert callbacks == [], "no signal receivers: the pass service calls the fold itself"


def test_a_failing_fold_is_logged_and_the_pass_stands(
    lab, django_capture_on_commit_callbacks, monkeypatch, caplog
):
    def broken(**kwargs: object) -> None:
        raise RuntimeError("rollups are broken")

    monkeypatch.setattr("portal.rollups.rollups_fold", broken)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_pass(cluster_id=lab.main.pk, now=NOW)
    record = SchedulingPass.objects.get(pk=outcome.pass_id)
    assert (record.status, record.rollups_ms) == ("completed", None)
    assert "rollups_fold failed" in caplog.text


def test_the_first_fold_starts_at_the_current_hour_not_at_the_beginning_of_history(lab):
    old = _workload(lab)
    _run(old, start=NOW - timedelta(days=30), end=NOW - timedelta(days=29), wait_s=5)
    recent = _workload(lab, workload_class="debug")
    _run(recent, start=NOW - timedelta(minutes=20), wait_s=7)
    rollups_fold(cluster_id=lab.main.pk, now=NOW)
    assert list(WaitHour.objects.values_list("workload_class", "count")) == [("debug", 1)]


def test_seeding_history_twice_only_backfills_and_never_touches_a_live_queue(lab):
    from portal.demo_history import history_seed

    history_seed(cluster=lab.main, now=NOW, days=2)
    hours, workloads = ClusterHour.objects.count(), Workload.objects.count()
    history_seed(cluster=lab.main, now=NOW + timedelta(hours=1), days=2)
    assert (
        ClusterHour.objects.count() == hours + 0
    )  # everything up to NOW already exists: nothing older to add
    assert Workload.objects.count() == workloads
    history_seed(cluster=lab.main, now=NOW, days=3)
    assert ClusterHour.objects.count() == hours + 24  # one more day, before the first existing hour


def test_a_pending_workload_gets_a_reason_history_entry_each_time_its_code_changes(folded_once):
    from portal.models import ReasonChange

    lab = folded_once
    workload = _workload(lab)
    reason = PendingReason.objects.create(
        workload=workload, code="FAIR_SHARE_QUEUED", message="3 ahead", updated_at=NOW
    )
    rollups_fold(cluster_id=lab.main.pk, now=NOW)
    PendingReason.objects.filter(pk=reason.pk).update(message="2 ahead")  # same code: not a change
    rollups_fold(cluster_id=lab.main.pk, now=NOW + timedelta(minutes=1))
    PendingReason.objects.filter(pk=reason.pk).update(code="FRAGMENTED", message="12 GPUs free on 5 nodes")
    rollups_fold(cluster_id=lab.main.pk, now=NOW + timedelta(minutes=2))
    assert list(ReasonChange.objects.order_by("at").values_list("code", "message")) == [
        ("FAIR_SHARE_QUEUED", "3 ahead"),
        ("FRAGMENTED", "12 GPUs free on 5 nodes"),
    ]
    api = client_for(lab.bob).get(f"/api/v1/workloads/{workload.pk}/why-pending/").json()
    assert [entry["code"] for entry in api["reason_history"]] == ["FRAGMENTED", "FAIR_SHARE_QUEUED"]
    assert (
        "12 GPUs free on 5 nodes"
        in client_for(lab.bob).get(f"/scheduling/workloads/{workload.pk}/").content.decode()
    )
