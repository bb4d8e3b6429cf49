"""Per-user usage: the UserHour rollup folded with AllocationHour, read by the pass and by pages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.accounting import accounting_charge_usage, user_usage_in_window
from scheduling.models import Run, UserHour
from scheduling.services import run_close, run_open, workload_submit
from scheduling.snapshot import snapshot_build, snapshot_read
from tests.scheduling.conftest import T0

WINDOW = timedelta(days=7)


def at(seconds: float):  # noqa: ANN201
    return T0 + timedelta(seconds=seconds)


def started(lab, *, actor, path: str, gpus: int = 4, seconds: float = 0):  # noqa: ANN001, ANN201
    workload = workload_submit(
        actor=actor, cluster=lab.main, allocation_path=path, gpus=gpus, now=at(seconds)
    ).workload
    run, _ = run_open(workload=workload, attempt=1, placement=[["n0", gpus]], started_at=at(seconds),
                      protected_until=at(seconds), funded=True)  # fmt: skip
    return run


def user_hours(lab) -> dict:  # noqa: ANN001
    return {
        (row.allocation_id, row.user_name, row.hour): row.used_gpu_s
        for row in UserHour.objects.filter(cluster=lab.main)
    }


def test_each_charge_folds_runs_into_hourly_rows_per_allocation_and_user(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    started(lab, actor=lab.bob, path="lab/vision/perception", gpus=4, seconds=3000)
    started(lab, actor=lab.dave, path="lab/language", gpus=2, seconds=0)
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(4200))
    assert user_hours(lab) == {
        (lab.perception.pk, "bob", at(0)): 4 * 600.0,
        (lab.perception.pk, "bob", at(3600)): 4 * 600.0,
        (lab.language.pk, "dave", at(0)): 2 * 3600.0,
        (lab.language.pk, "dave", at(3600)): 2 * 600.0,
    }


def test_a_run_closed_after_the_watermark_gives_back_its_users_over_charge_too(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    run = started(lab, actor=lab.bob, path="lab/vision/perception")
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(1000))
    run_close(run=run, ended_at=at(400), reason="failed")
    assert user_hours(lab) == {(lab.perception.pk, "bob", at(0)): 4 * 400.0}


def test_user_usage_is_read_from_the_rollup_not_from_the_runs_of_the_window(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    run = started(lab, actor=lab.bob, path="lab/vision/perception")
    run_close(run=run, ended_at=at(600), reason="completed")
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(900))
    Run.objects.filter(pk=run.pk).update(gpus=100)  # a rescan of the runs would now see 100 GPUs
    usage = user_usage_in_window(cluster_id=lab.main.pk, now=at(900), window=WINDOW)
    assert usage == {(lab.perception.pk, "bob"): 4 * 600.0}


def test_a_snapshot_between_passes_adds_open_runs_since_the_last_charge_to_the_rollup(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    started(lab, actor=lab.bob, path="lab/vision/perception", gpus=2)
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(600))
    snapshot = snapshot_build(cluster=lab.main, now=at(1000))
    assert dict(snapshot.user_usage) == {("lab/vision/perception", "bob"): pytest.approx(2 * 1000.0)}
    assert snapshot.usage["lab/vision/perception"] == pytest.approx(2 * 1000.0)


def test_the_public_snapshot_equals_the_pass_snapshot_and_touches_nothing(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    started(lab, actor=lab.bob, path="lab/vision/perception", gpus=2)
    workload_submit(actor=lab.dave, cluster=lab.main, allocation_path="lab/language", gpus=8, now=at(10))
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(600))
    built = snapshot_build(cluster=lab.main, now=at(600))
    assert built == snapshot_read(cluster=lab.main, now=at(600)).snapshot
    assert dict(built.user_usage) == {("lab/vision/perception", "bob"): 2 * 600.0}
