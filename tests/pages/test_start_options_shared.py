"""Start options after a pass: the workloads first viewed after one pass share one snapshot read,
and the pending workloads a page reads are remembered by the process (``OptionsMemory``), checked
against the database on every read; either way the options are exactly those of a fresh read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps

from portal.api.serializers import options_json
from scheduling import reports
from scheduling.models import SchedulingPass, Workload
from scheduling.pass_cache import PendingMemory
from scheduling.services.workloads import workload_cancel, workload_hold, workload_submit
from scheduling.snapshot import snapshot_build
from tests.pages.conftest import NOW, client_for


@pytest.fixture(autouse=True)
def _fresh_options_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The web process's memory starts empty for each test."""
    monkeypatch.setattr(apps.get_app_config("scheduling"), "options_memory", reports.OptionsMemory())


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every snapshot read the options make."""
    made = []
    real = reports.options_snapshot

    def counted(**kwargs):  # noqa: ANN003, ANN202
        made.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(reports, "options_snapshot", counted)
    return made


def a_pass(history) -> SchedulingPass:  # noqa: ANN001
    return SchedulingPass.objects.create(cluster=history.main, started_at=NOW, finished_at=NOW)


def fresh(workload: Workload) -> list:
    """The options from a read of their own (no shared snapshot)."""
    return reports.start_options(workload=Workload.objects.get(pk=workload.pk), now=NOW)


def options_api(history, workload: Workload) -> list:  # noqa: ANN001
    return client_for(history.bob).get(f"/api/v1/workloads/{workload.pk}/start-options/").json()["options"]


def test_the_page_cache_of_pending_workloads_gives_what_a_full_read_gives(history, frozen_now):
    memory = PendingMemory()
    assert snapshot_build(cluster=history.main, now=NOW, memory=memory) == snapshot_build(
        cluster=history.main, now=NOW
    )
    assert len(memory.get(history.main)) >= len(history.bob_pending) > 0, "the read is remembered"
    first, second, third = history.bob_pending[:3]
    workload_hold(workload=first, actor=history.bob, now=NOW)
    workload_cancel(workload=second, actor=history.bob, now=NOW)
    Workload.objects.filter(pk=third.pk).update(allocation=history.generation)  # moved
    workload_submit(actor=history.bob, cluster=history.main, allocation_path="lab/vision/perception",
                    gpus=4, now=NOW - timedelta(minutes=1))  # fmt: skip
    assert snapshot_build(cluster=history.main, now=NOW, memory=memory) == snapshot_build(
        cluster=history.main, now=NOW
    )


def test_workloads_first_viewed_after_one_pass_share_one_snapshot_read(history, frozen_now, reads):
    a_pass(history)
    workloads = list(history.bob_pending)
    assert len(workloads) >= 3
    shown = [options_api(history, workload) for workload in workloads]
    assert len(reads) == 1
    expected = [fresh(workload) for workload in workloads]
    assert shown == [options_json(options) for options in expected]
    assert any(shown)


def test_the_shared_snapshot_gives_exactly_the_options_of_a_read_of_their_own(history, frozen_now):
    latest, memory = a_pass(history), reports.OptionsMemory()
    for workload in history.bob_pending:
        shared = reports.start_options(
            workload=workload, now=NOW, latest_pass=(latest.pk, latest.nonce), memory=memory
        )
        assert shared == fresh(workload)


def test_a_new_pass_reads_the_cluster_again(history, frozen_now, reads):
    first, second = history.bob_pending[:2]
    a_pass(history)
    options_api(history, first)
    a_pass(history)
    options_api(history, second)
    assert len(reads) == 2


def test_work_submitted_or_held_since_the_shared_read_is_read_afresh(history, frozen_now, reads):
    a_pass(history)
    first, second = history.bob_pending[:2]
    options_api(history, first)
    submitted = workload_submit(actor=history.bob, cluster=history.main, allocation_path="lab/vision/perception",
                                gpus=2, now=NOW - timedelta(minutes=1)).workload  # fmt: skip
    shown = options_api(history, submitted)
    assert len(reads) == 2
    workload_hold(workload=second, actor=history.bob, now=NOW)
    assert options_api(history, second) == []
    assert len(reads) == 2, "a held workload has no options: it need not read anything"
    assert shown == options_json(fresh(submitted))
    assert shown
