"""The pyramid's and the pages' formulas, as tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from budgets.delivery import attribute_undelivered
from portal.glossary import TERMS, term
from portal.metrics import (
    bucket_start,
    count_meeting_budget,
    fair_share_ratio,
    meets_budget,
    merge_histograms,
    percentile,
    ratio,
)
from portal.models import WAIT_EDGES_S
from portal.rollups import wait_bin
from portal.templatetags.portal_help import duration, pct
from scheduling.reports import first_shared_ancestor


def _histogram(**bins: int) -> list[int]:
    counts = [0] * len(WAIT_EDGES_S)
    for edge, count in bins.items():
        counts[WAIT_EDGES_S.index(float(edge.removeprefix("s")))] = count
    return counts


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [pytest.param(1, 2, 0.5, id="half"), pytest.param(3, 0, None, id="no-denominator-is-no-data")],
)
def test_ratio_is_none_without_a_denominator(numerator, denominator, expected):
    assert ratio(numerator, denominator) == expected


@pytest.mark.parametrize(
    ("delivered", "owed", "meets"),
    [
        pytest.param(95, 100, True, id="exactly-95pct"),
        pytest.param(94.9, 100, False, id="just-under"),
        pytest.param(0, 0, True, id="owed-nothing"),
        pytest.param(120, 100, True, id="over-delivered"),
    ],
)
def test_an_allocation_meets_its_budget_at_95_percent(delivered, owed, meets):
    assert meets_budget(delivered, owed) is meets


def test_only_allocations_that_were_owed_something_are_counted():
    assert count_meeting_budget([(95, 100), (50, 100), (10, 0)]) == (1, 2)


@pytest.mark.parametrize(
    ("histogram", "q", "expected"),
    [
        pytest.param(_histogram(s60=10), 0.5, 90.0, id="middle-of-one-bin"),
        pytest.param(_histogram(s0=5, s3600=5), 0.5, 5.0, id="median-at-the-top-of-the-first-bin"),
        pytest.param(_histogram(s0=1, s3600=9), 0.9, 3600 + 3600 * 8 / 9, id="p90-interpolates"),
        pytest.param(_histogram(s345600=3), 0.5, 345600.0, id="open-ended-last-bin-is-a-floor"),
        pytest.param([0] * len(WAIT_EDGES_S), 0.5, None, id="empty"),
    ],
)
def test_percentile_reads_a_wait_histogram(histogram, q, expected):
    assert (
        percentile(histogram, q) == pytest.approx(expected)
        if expected is not None
        else percentile(histogram, q) is None
    )


def test_merged_histograms_add_up_bin_by_bin():
    assert merge_histograms([_histogram(s5=1), _histogram(s5=2, s60=1)]) == _histogram(s5=3, s60=1)


@pytest.mark.parametrize(
    ("wait_s", "edge"),
    [(0, 0), (4.9, 0), (5, 5), (59, 30), (3600, 3600), (10**7, 345600), (-3, 0)],
    ids=["zero", "under-5s", "at-5s", "59s", "an-hour", "beyond-the-last-edge", "negative"],
)
def test_waits_fall_into_the_bin_whose_lower_edge_they_reach(wait_s, edge):
    assert WAIT_EDGES_S[wait_bin(wait_s)] == edge


@pytest.mark.parametrize(
    ("days", "hour", "expected_hour"),
    [(7, 13, 13), (30, 13, 12), (90, 13, 0)],
    ids=["hourly-for-a-week", "six-hourly-for-a-month", "daily-for-a-quarter"],
)
def test_series_points_get_coarser_for_longer_periods(days, hour, expected_hour):
    moment = datetime(2026, 11, 3, hour, tzinfo=UTC)
    assert bucket_start(moment, days=days) == moment.replace(hour=expected_hour)


@pytest.mark.parametrize(
    ("undelivered", "weights", "expected"),
    [
        pytest.param(
            10, {"waiting": 3, "fragmentation": 1}, {"waiting": 7.5, "fragmentation": 2.5}, id="in-proportion"
        ),
        pytest.param(10, {}, {"other": 10}, id="unexplained-goes-to-other"),
        pytest.param(0, {}, {}, id="nothing-undelivered"),
        pytest.param(4, {"waiting": 2, "unhealthy": -1}, {"waiting": 4}, id="negative-weights-ignored"),
    ],
)
def test_undelivered_owed_time_is_split_over_its_causes(undelivered, weights, expected):
    parts = attribute_undelivered(undelivered=undelivered, weights=weights)
    assert parts == pytest.approx(expected)
    assert sum(parts.values()) == pytest.approx(undelivered)


@pytest.mark.parametrize(
    ("usage", "budget", "sibling_usage", "sibling_budget", "expected"),
    [
        pytest.param(50, 10, 100, 40, 2.0, id="half-the-usage-on-a-quarter-of-the-budget-is-over-served"),
        pytest.param(10, 20, 100, 40, 0.2, id="under-served"),
        pytest.param(0, 10, 0, 40, None, id="nobody-used-anything"),
        pytest.param(10, 0, 100, 40, None, id="unfunded"),
    ],
)
def test_fair_share_ratio_is_usage_share_over_budget_share(
    usage, budget, sibling_usage, sibling_budget, expected
):
    result = fair_share_ratio(
        usage=usage, budget=budget, sibling_usage=sibling_usage, sibling_budget=sibling_budget
    )
    assert result == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("mine", "theirs", "expected"),
    [
        ("lab/vision/perception", "lab/language", ("lab", "lab/vision", "lab/language")),
        (
            "lab/vision/perception",
            "lab/vision/generation",
            ("lab/vision", "lab/vision/perception", "lab/vision/generation"),
        ),
        ("lab/a", "other/b", ("", "lab", "other")),
        ("lab/a", "lab/a", ("lab/a", "lab/a", "lab/a")),
    ],
    ids=["cousins-meet-at-the-org", "siblings-meet-at-the-parent", "different-roots", "same-allocation"],
)
def test_the_first_shared_ancestor_names_both_branches(mine, theirs, expected):
    assert first_shared_ancestor(mine, theirs) == expected


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (42, "42 s"),
        (600, "10 min"),
        (3 * 3600 + 1200, "3 h 20 min"),
        (2 * 86400 + 4 * 3600, "2 d 4 h"),
    ],
)
def test_durations_read_at_a_glance(seconds, text):
    assert duration(seconds) == text


def test_percentages_show_no_data_as_a_dash_not_zero():
    assert pct(None) == "—"
    assert pct(0.9731) == "97.3%"


def test_every_design_term_is_in_the_glossary_and_a_typo_fails_loudly():
    words = {t.word for t in TERMS}
    for word in ["allocation", "entitlement", "usage", "fair-share ratio", "owed", "delivered", "minimum runtime",
                 "protected until", "resumable", "pending reason", "metrics pyramid", "budget tree"]:  # fmt: skip
        assert word in words
    with pytest.raises(KeyError, match="No glossary term"):
        term("priority")


def test_the_period_helper_covers_whole_hours_up_to_now():
    from portal.metrics import period_bounds

    now = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)
    start, end = period_bounds(now=now, days=7)
    assert end == datetime(2026, 11, 20, 13, tzinfo=UTC)
    assert end - start == timedelta(days=7)
