"""The window usage a pass ranked by is stored with it, so the pages that re-plan (start options)
rank the same way without summing a week of hourly rows again."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.accounting import accounting_charge_usage
from scheduling.models import PassLease
from scheduling.pass_cache import PendingMemory
from scheduling.snapshot import snapshot_build
from tests.scheduling.test_pass import at, pass_at, submit


def _usage_queries(queries) -> list[str]:  # noqa: ANN001
    return [
        q["sql"]
        for q in queries
        if "scheduling_userhour" in q["sql"] or "scheduling_allocationhour" in q["sql"]
    ]


def _busy_lab(lab):  # noqa: ANN001, ANN202
    submit(lab, lab.bob, "lab/vision/perception", 8, metadata={"duration_s": 90000})
    submit(lab, lab.dave, "lab/language", 16, metadata={"duration_s": 90000})
    pass_at(lab, 10)
    submit(lab, lab.bob, "lab/vision/perception", 16, seconds=20)  # waits: the cluster is full
    return pass_at(lab, 5000)


def test_after_a_pass_a_page_ranks_by_the_pass_s_own_window_sums_without_reading_the_hours(lab):
    record = _busy_lab(lab)
    fresh = snapshot_build(cluster=lab.main, now=record.started_at)

    with CaptureQueriesContext(connection) as queries:
        stored = snapshot_build(cluster=lab.main, now=record.started_at, memory=PendingMemory())

    assert dict(stored.usage) == dict(fresh.usage) and dict(stored.user_usage) == dict(fresh.user_usage)
    assert dict(stored.user_usage)[("lab/language", "dave")] > 0
    assert _usage_queries(queries.captured_queries) == []


def test_a_page_a_little_after_the_pass_adds_the_open_runs_since_as_a_fresh_read_does(lab):
    record = _busy_lab(lab)
    later = at(5060)
    fresh = snapshot_build(cluster=lab.main, now=later)
    stored = snapshot_build(cluster=lab.main, now=later, memory=PendingMemory())
    assert dict(stored.user_usage) == dict(fresh.user_usage)
    assert (
        stored.user_usage[("lab/language", "dave")]
        > snapshot_build(cluster=lab.main, now=record.started_at).user_usage[("lab/language", "dave")]
    )


def test_once_usage_is_charged_past_the_stored_sums_a_page_reads_the_hours_again(lab):
    _busy_lab(lab)
    accounting_charge_usage(cluster_id=lab.main.pk, now=at(6000))  # as a pass's reconcile does

    with CaptureQueriesContext(connection) as queries:
        stored = snapshot_build(cluster=lab.main, now=at(6000), memory=PendingMemory())

    assert _usage_queries(queries.captured_queries)
    assert dict(stored.user_usage) == dict(snapshot_build(cluster=lab.main, now=at(6000)).user_usage)
    assert PassLease.objects.get(pk=lab.main.pk).standing["accounted_until"] == at(5000).timestamp()
