"""Usage helpers: GPU-seconds per allocation and per (allocation, user), windowed or decayed."""

import math

import pytest

from scheduling.policy import decayed_usage, usage_in_window

NOW = 10_000.0


@pytest.mark.parametrize(
    ("slices", "window", "expected"),
    [
        pytest.param([("a", "u", 2, 9_000.0, 9_500.0)], 5_000.0, 1_000.0, id="a finished slice counts whole"),
        pytest.param(
            [("a", "u", 1, 0.0, 9_000.0)], 5_000.0, 4_000.0, id="a slice is clipped at the window start"
        ),
        pytest.param([("a", "u", 4, 9_900.0, None)], 5_000.0, 400.0, id="running work counts up to now"),
        pytest.param(
            [("a", "u", 4, 1_000.0, 2_000.0)], 5_000.0, 0.0, id="a slice before the window counts nothing"
        ),
    ],
)
def test_usage_in_window(slices, window, expected):
    by_allocation, by_user = usage_in_window(slices, NOW, window)
    assert by_allocation.get("a", 0.0) == pytest.approx(expected)
    assert by_user.get(("a", "u"), 0.0) == pytest.approx(expected)


def test_usage_in_window_keeps_allocations_and_users_apart():
    slices = [
        ("a", "alice", 1, 9_000.0, None),
        ("a", "bob", 2, 9_000.0, None),
        ("b", "alice", 1, 9_500.0, None),
    ]
    by_allocation, by_user = usage_in_window(slices, NOW, 5_000.0)
    assert by_allocation == {"a": 3_000.0, "b": 500.0}
    assert by_user == {("a", "alice"): 1_000.0, ("a", "bob"): 2_000.0, ("b", "alice"): 500.0}


def test_decayed_usage_of_recent_work_is_almost_its_gpu_seconds():
    by_allocation, _ = decayed_usage([("a", "u", 1, NOW - 10.0, NOW)], NOW, half_life_s=1e9)
    assert by_allocation["a"] == pytest.approx(10.0, rel=1e-6)


def test_decayed_usage_halves_per_half_life_of_age():
    hour = 3600.0
    recent, _ = decayed_usage([("a", "u", 1, NOW - 1.0, NOW)], NOW, half_life_s=hour)
    old, _ = decayed_usage([("a", "u", 1, NOW - hour - 1.0, NOW - hour)], NOW, half_life_s=hour)
    assert old["a"] / recent["a"] == pytest.approx(0.5, rel=1e-3)


def test_decayed_usage_of_a_long_slice_is_its_closed_form_integral():
    half_life = 1_000.0
    by_allocation, _ = decayed_usage([("a", "u", 2, NOW - 3_000.0, NOW)], NOW, half_life)
    expected = 2 * half_life / math.log(2) * (1 - 2 ** (-3))
    assert by_allocation["a"] == pytest.approx(expected)
