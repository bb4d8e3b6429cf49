"""Incremental usage: the sliding window from hourly marks, and the decayed sum."""

from __future__ import annotations

import math
import random

import pytest

from scheduling.simulator.usage import DecayedUsage, WindowedUsage


def test_a_steady_rate_fills_exactly_one_window():
    usage = WindowedUsage(window_s=7200.0)
    usage.set_rate("nlp", 0.0, 8)

    assert usage.value("nlp", 3600.0) == 8 * 3600
    assert usage.value("nlp", 50_000.0) == pytest.approx(8 * 7200)


def test_work_that_stopped_leaves_the_window_as_it_slides_past():
    usage = WindowedUsage(window_s=7200.0)
    usage.set_rate("nlp", 0.0, 4)
    usage.set_rate("nlp", 3600.0, 0)  # 4 GPUs for the first hour only

    assert usage.value("nlp", 7200.0) == 4 * 3600
    assert usage.value("nlp", 9000.0) == pytest.approx(4 * 1800)  # half of that hour is still inside
    assert usage.value("nlp", 10_800.0) == pytest.approx(0.0)


def test_an_unknown_key_has_no_usage():
    assert WindowedUsage(window_s=60.0).value("nobody", 100.0) == 0.0
    assert DecayedUsage(half_life_s=60.0).value("nobody", 100.0) == 0.0


def test_decayed_usage_halves_every_half_life_once_work_stops():
    usage = DecayedUsage(half_life_s=3600.0)
    usage.set_rate("nlp", 0.0, 2)
    usage.set_rate("nlp", 1000.0, 0)
    at_stop = usage.value("nlp", 1000.0)

    assert at_stop == pytest.approx(2 * 3600 / math.log(2) * (1 - 2 ** (-1000 / 3600)))
    assert usage.value("nlp", 4600.0) == pytest.approx(at_stop / 2)


@pytest.mark.parametrize("usage", [WindowedUsage(window_s=7200.0), DecayedUsage(half_life_s=5000.0)])
def test_reading_many_keys_at_once_gives_exactly_what_each_read_gives(usage):
    """``values`` (one loop per snapshot) and ``value`` must agree to the last bit."""
    for at, key, rate in [
        (0.0, "a", 4),
        (100.0, "b", 2),
        (3700.0, "a", 0),
        (9000.0, "c", 8),
        (9100.0, "b", 5),
    ]:
        usage.set_rate(key, at, rate)
    keys = ["a", "b", "c", "unknown"]
    for now in (50.0, 3600.0, 7199.0, 9050.0, 10_000.0, 12_345.6, 20_000.0, 100_000.0):
        assert usage.values(keys, now) == {key: usage.value(key, now) for key in keys}


@pytest.mark.parametrize("seed", range(3))
def test_reading_many_keys_at_once_is_exact_at_any_moment(seed):
    """Random rate changes at odd moments; reads inside closed hours, the open hour, and past it."""
    rng = random.Random(seed)
    windowed, decayed = WindowedUsage(window_s=4 * 3600.0), DecayedUsage(half_life_s=3000.0)
    keys = [("lab/a", "ann"), ("lab/a", "bob"), ("lab/b", "cy"), ("lab/b", "dee")]
    now = 0.0
    for _ in range(300):
        now += rng.choice([1.0, 17.5, 600.0, 3599.9, 3600.0, 9000.0]) * rng.random()
        if rng.random() < 0.5:
            key, rate = rng.choice(keys), rng.choice([0, 0, 1, 8, 24])
            windowed.set_rate(key, now, rate)
            decayed.set_rate(key, now, rate)
        for usage in (windowed, decayed):
            assert usage.values(keys, now) == {key: usage.value(key, now) for key in keys}
