"""Two passes for the same cluster started at once: exactly one runs."""

from __future__ import annotations

import os
import threading

import pytest
from django.db import OperationalError, connection

from scheduling.locks import retry_on_contention
from scheduling.models import SchedulingPass
from scheduling.passes import PassOutcome, run_pass
from tests.scheduling.conftest import build_lab


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_number", range(int(os.environ.get("LEASE_ROUNDS", "1"))))
def test_two_passes_started_at_once_for_one_cluster_run_exactly_once(round_number):
    """On SQLite the losing claim may meet a locked table: that is ran=False too, never an error
    (.ci/run repeats this 50 times on SQLite with LEASE_ROUNDS=50)."""
    lab = build_lab()
    lab.main.backend_settings = {"observe_delay_s": 1.0}  # keep the first pass busy while the second tries
    lab.main.save()
    outcomes: list[PassOutcome] = []
    barrier = threading.Barrier(2)

    def one_pass() -> None:
        try:
            barrier.wait()
            outcomes.append(run_pass(cluster_id=lab.main.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcome.ran for outcome in outcomes) == [False, True]
    assert SchedulingPass.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_claim_is_released_when_a_pass_ends_so_the_next_one_runs():
    lab = build_lab()
    assert run_pass(cluster_id=lab.main.pk).ran
    assert run_pass(cluster_id=lab.main.pk).ran


def test_a_write_refused_by_a_locked_table_is_tried_again_and_other_errors_are_not():
    refusals = [OperationalError("database table is locked")] * 2

    def write() -> str:
        if refusals:
            raise refusals.pop()
        return "written"

    assert retry_on_contention(write) == "written"  # third time

    def always_locked() -> None:
        raise OperationalError("database table is locked")

    assert retry_on_contention(always_locked, tries=3) is None  # given up: the caller skips

    def broken() -> None:
        raise OperationalError("no such table: scheduling_schedulingpass")

    with pytest.raises(OperationalError, match="no such table"):
        retry_on_contention(broken)
