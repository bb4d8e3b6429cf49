"""History retention: folded, old, decision-less passes and old folded samples go; the rest stays."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from portal.models import RollupWatermark
from portal.retention import history_prune
from scheduling.models import Decision, SchedulingPass, UtilisationSample, Workload
from tests.pages.conftest import NOW


def _pass(lab, days_ago: float, *, finished: bool = True) -> SchedulingPass:  # noqa: ANN001
    started = NOW - timedelta(days=days_ago)
    return SchedulingPass.objects.create(
        cluster=lab.main, started_at=started, finished_at=started + timedelta(seconds=1) if finished else None
    )


@pytest.fixture
def history(lab):  # noqa: ANN001
    workload = Workload.objects.create(cluster=lab.main, allocation=lab.perception, user_name="bob", gpus=8,
                                       state="running", state_changed_at=NOW, submitted_at=NOW - timedelta(days=50),
                                       queued_at=NOW - timedelta(days=50))  # fmt: skip
    old_empty = [_pass(lab, 45 - i) for i in range(3)]
    old_deciding = _pass(lab, 44)
    Decision.objects.create(scheduling_pass=old_deciding, cluster=lab.main, workload=workload, kind="start",
                            created_at=old_deciding.started_at)  # fmt: skip
    old_unfinished = _pass(lab, 43, finished=False)
    old_unfolded = _pass(lab, 42)
    recent = [_pass(lab, 2), _pass(lab, 1)]
    samples = [UtilisationSample.objects.create(workload=workload, cluster=lab.main, gpus=8, gpu_utilisation=60,
                                                at=NOW - timedelta(days=days)) for days in (40, 40, 39, 1)]  # fmt: skip
    RollupWatermark.objects.update_or_create(
        cluster=lab.main,
        defaults={"last_pass_id": recent[-1].pk, "last_utilisation_id": samples[2].pk},
    )
    # Folded up to the latest pass, except that one old pass is not folded yet (watermark below it):
    RollupWatermark.objects.filter(cluster=lab.main).update(last_pass_id=old_unfolded.pk - 1)
    return {
        "old_empty": old_empty, "old_deciding": old_deciding, "old_unfinished": old_unfinished,
        "old_unfolded": old_unfolded, "recent": recent, "samples": samples,
    }  # fmt: skip


def test_only_old_folded_decision_less_passes_and_old_folded_samples_are_deleted(history):
    pruned = history_prune(now=NOW, keep_days=30)

    assert [(p.cluster, p.passes, p.samples) for p in pruned if p.cluster == "main"] == [("main", 3, 3)]
    kept = set(SchedulingPass.objects.values_list("pk", flat=True))
    assert not kept & {p.pk for p in history["old_empty"]}
    assert {history["old_deciding"].pk, history["old_unfinished"].pk, history["old_unfolded"].pk} <= kept
    assert {p.pk for p in history["recent"]} <= kept
    assert Decision.objects.filter(scheduling_pass=history["old_deciding"]).exists()
    assert list(UtilisationSample.objects.values_list("pk", flat=True)) == [history["samples"][3].pk]


def test_the_two_latest_passes_are_kept_however_old(history):
    SchedulingPass.objects.filter(pk__in=[p.pk for p in history["recent"]]).update(
        started_at=NOW - timedelta(days=100)
    )
    RollupWatermark.objects.update(last_pass_id=history["recent"][-1].pk)
    history_prune(now=NOW, keep_days=30)
    assert SchedulingPass.objects.filter(pk__in=[p.pk for p in history["recent"]]).count() == 2


def test_a_cluster_never_folded_keeps_everything(history):
    RollupWatermark.objects.all().delete()
    before = SchedulingPass.objects.count(), UtilisationSample.objects.count()
    history_prune(now=NOW, keep_days=1)
    assert (SchedulingPass.objects.count(), UtilisationSample.objects.count()) == before


def test_the_command_reports_per_cluster_and_a_dry_run_deletes_nothing(history, settings):
    out = StringIO()
    before = SchedulingPass.objects.count()
    call_command("prune_history", "--days", "30", "--dry-run", stdout=out)
    assert "main: would delete 3 passes, 3 utilisation samples" in out.getvalue()
    assert SchedulingPass.objects.count() == before

    settings.HISTORY_RETENTION_DAYS = 30
    out = StringIO()
    call_command("prune_history", stdout=out)
    assert "deleted 3 passes and 3 samples older than 30 days in all" in out.getvalue()
    assert SchedulingPass.objects.count() == before - 3


def test_the_command_refuses_a_retention_below_one_day(history):
    before = SchedulingPass.objects.count()
    with pytest.raises(CommandError, match="at least 1"):
        call_command("prune_history", "--days", "0")
    assert SchedulingPass.objects.count() == before == 8
