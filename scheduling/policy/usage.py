"""Usage helpers the callers use to fill ``Snapshot.usage`` and ``Snapshot.user_usage``.

A *slice* is one contiguous stretch of a workload on GPUs: ``(allocation, user, gpus, start, end)``
with ``end=None`` while it still runs (it then counts up to ``now``). Both helpers return
GPU-seconds per allocation and per (allocation, user); they never read a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scheduling.policy.types import AllocationPath

UsageSlice = tuple[AllocationPath, str, int, float, float | None]
UsageTotals = tuple[dict[AllocationPath, float], dict[tuple[AllocationPath, str], float]]


def usage_in_window(slices: Iterable[UsageSlice], now: float, window_s: float) -> UsageTotals:
    """GPU-seconds inside ``[now - window_s, now]``: each slice is clipped to the window."""
    window_start = now - window_s
    by_allocation: dict[AllocationPath, float] = {}
    by_user: dict[tuple[AllocationPath, str], float] = {}
    for allocation, user, gpus, start, end in slices:
        stop = now if end is None else min(end, now)
        seconds = stop - max(start, window_start)
        if seconds > 0:
            _add(by_allocation, by_user, allocation, user, gpus * seconds)
    return by_allocation, by_user


def decayed_usage(slices: Iterable[UsageSlice], now: float, half_life_s: float) -> UsageTotals:
    """GPU-seconds where a second that lies ``age`` seconds in the past weighs ``2 ** (-age / half_life)``.

    The integral of that weight over ``[start, stop]`` is closed form, so a slice costs O(1):
    ``gpus * h / ln 2 * (2 ** (-(now - stop) / h) - 2 ** (-(now - start) / h))``.
    """
    rate = math.log(2) / half_life_s
    by_allocation: dict[AllocationPath, float] = {}
    by_user: dict[tuple[AllocationPath, str], float] = {}
    for allocation, user, gpus, start, end in slices:
        stop = now if end is None else min(end, now)
        if stop <= start:
            continue
        weight = (math.exp(-rate * (now - stop)) - math.exp(-rate * (now - start))) / rate
        _add(by_allocation, by_user, allocation, user, gpus * weight)
    return by_allocation, by_user


def _add(by_allocation: dict, by_user: dict, allocation: AllocationPath, user: str, amount: float) -> None:
    by_allocation[allocation] = by_allocation.get(allocation, 0.0) + amount
    key = (allocation, user)
    by_user[key] = by_user.get(key, 0.0) + amount
