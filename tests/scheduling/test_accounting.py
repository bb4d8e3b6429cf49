"""Accounting: hourly buckets kept exact as runs open and close (also late), the sliding window,
entitlements, owed GPU-hours and wait times."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.accounting import (
    accounting_charge_owed,
    accounting_charge_usage,
    hour_slices,
    usage_in_window,
)
from scheduling.models import AllocationHour
from scheduling.selectors import wait_times
from scheduling.services import run_close, run_open, workload_submit
from tests.scheduling.conftest import T0


def at(seconds: float):  # noqa: ANN201
    return T0 + timedelta(seconds=seconds)


def used(lab, node) -> float:  # noqa: ANN001
    return sum(AllocationHour.objects.filter(allocation=node).values_list("used_gpu_s", flat=True))


def started(lab, *, gpus: int = 4, seconds: float = 0, submitted: float = 0, **extra: object):  # noqa: ANN001, ANN201
    workload = workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=gpus,
                               now=at(submitted), **extra).workload  # fmt: skip
    run, _ = run_open(workload=workload, attempt=1, placement=[["n0", gpus]], started_at=at(seconds),
                      protected_until=at(seconds), funded=True)  # fmt: skip
    return run


@pytest.mark.parametrize(
    ("start", "end", "pieces"),
    [
        pytest.param(0, 600, [(0, 600.0)], id="inside-one-hour"),
        pytest.param(3000, 4200, [(0, 600.0), (3600, 600.0)], id="across-an-hour"),
        pytest.param(600, 600, [], id="empty"),
        pytest.param(0, 7200, [(0, 3600.0), (3600, 3600.0)], id="two-whole-hours"),
    ],
)
def test_hour_slices_split_an_interval_at_hour_boundaries(start, end, pieces):
    assert list(hour_slices(at(start), at(end))) == [(at(hour), seconds) for hour, seconds in pieces]


def test_an_open_run_is_charged_pass_by_pass_and_its_close_settles_the_last_slice(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    run = started(lab)
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(600))
    assert used(lab, lab.perception) == 4 * 600
    run_close(run=run, ended_at=at(900), reason="completed")
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(1200))
    assert used(lab, lab.perception) == 4 * 900


def test_a_run_recorded_after_the_watermark_is_charged_from_its_real_start(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(600))
    started(lab, seconds=100)  # the backend says it began at 100 s; we learn of it at 600 s
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(700))
    assert used(lab, lab.perception) == 4 * 600


def test_a_run_closed_after_the_watermark_gives_back_what_was_over_charged(lab):
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(0))
    run = started(lab)
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(1000))
    run_close(run=run, ended_at=at(400), reason="failed")  # it had ended at 400 s
    assert used(lab, lab.perception) == 4 * 400


def test_the_window_prorates_the_hour_it_starts_in(lab):
    AllocationHour.objects.create(cluster=lab.main, allocation=lab.perception, hour=at(0), used_gpu_s=3600.0)
    AllocationHour.objects.create(
        cluster=lab.main, allocation=lab.perception, hour=at(3600), used_gpu_s=100.0
    )
    usage = usage_in_window(cluster_id=lab.main.pk, now=at(3600 + 1800), window=timedelta(seconds=3600 + 900))
    # The window starts at 09:15: three quarters of the 09:00 bucket, all of the 10:00 one.
    assert usage[lab.perception.pk] == pytest.approx(2700.0 + 100.0)


def test_owed_is_the_integral_of_the_smaller_of_entitlement_and_demand(lab):
    accounting_charge_owed(cluster_id=lab.main.pk, now=at(0), owed_gpus={lab.perception.pk: 6.0})
    accounting_charge_owed(cluster_id=lab.main.pk, now=at(3600 + 600), owed_gpus={lab.perception.pk: 6.0})
    hours = dict(AllocationHour.objects.filter(allocation=lab.perception).values_list("hour", "owed_gpu_s"))
    assert hours == {at(0): 6.0 * 3600, at(3600): 6.0 * 600}


def test_wait_times_are_split_into_first_starts_and_restarts(lab):
    started(lab, submitted=0, seconds=30, workload_class="debug")
    started(lab, submitted=0, seconds=90, workload_class="debug")
    summary = wait_times(cluster=lab.main, since=at(0))
    assert summary["debug"]["count"] == 2
    assert summary["debug"]["p50_s"] in (30.0, 90.0) and summary["debug"]["p90_s"] == 90.0
    assert summary["debug"]["restart_count"] == 0
