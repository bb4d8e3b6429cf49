"""Usage kept incrementally, so a pass never re-reads the history of runs.

Each key (an allocation, or an allocation and a user) has a *rate*: the GPUs it runs right now.
Rates change only when work starts or stops, so usage is piecewise linear in time.

- :class:`WindowedUsage` keeps, per key, the cumulative GPU-seconds at every hour boundary (the
  prefix sums of hourly buckets). Usage in ``[now - window, now]`` is ``C(now) - C(now - window)``;
  ``C(now)`` is exact and ``C(now - window)`` is interpolated linearly inside its hour, so the
  only error is how unevenly the oldest hour was used. Cost per read: O(1).
- :class:`DecayedUsage` keeps an exponentially decayed sum with half-life ``h``: a GPU-second that
  lies ``age`` seconds in the past weighs ``2 ** (-age / h)``. Cost per read: O(1).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable


class WindowedUsage:
    """GPU-seconds per key inside a sliding window, from hourly cumulative marks."""

    def __init__(self, window_s: float, bucket_s: float = 3600.0) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._keys: dict[Hashable, list] = {}  # key -> [rate, last_t, total_at_last_t, marks]

    def set_rate(self, key: Hashable, now: float, rate: float) -> None:
        """From ``now`` on, ``key`` runs ``rate`` GPUs."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = [0.0, now, 0.0, [0.0] * (int(now // self.bucket_s) + 1)]
        self._advance(state, now)
        state[0] = rate

    def value(self, key: Hashable, now: float) -> float:
        state = self._keys.get(key)
        if state is None:
            return 0.0
        low = now - self.window_s
        total_now = state[2] + state[0] * (now - state[1])
        return total_now if low <= 0 else total_now - self._cumulative_at(state, low)

    def values(self, keys: Iterable[Hashable], now: float) -> dict[Hashable, float]:
        """``{key: value(key, now)}``, in one loop (a snapshot reads every key each pass)."""
        found, low = self._keys.get, now - self.window_s
        result = {}
        if low <= 0:
            for key in keys:
                state = found(key)
                result[key] = 0.0 if state is None else state[2] + state[0] * (now - state[1])
            return result
        # _cumulative_at(state, low), inlined, with what is the same for every key worked out once
        hour = int(low // self.bucket_s)
        start = hour * self.bucket_s
        end = start + self.bucket_s
        offset = low - start
        whole = offset / (end - start) if end > start else 0.0  # the fraction inside a closed hour
        after = hour + 1
        for key in keys:
            state = found(key)
            if state is None:
                result[key] = 0.0
                continue
            rate, last_t, total, marks = state
            total_now = total + rate * (now - last_t)
            if low >= last_t:
                result[key] = total_now - (total + rate * (low - last_t))
            elif after < len(marks):
                mark = marks[hour]
                result[key] = total_now - (mark + (marks[after] - mark) * whole)
            else:
                mark = marks[hour]
                fraction = offset / (last_t - start) if last_t > start else 0.0
                result[key] = total_now - (mark + (total - mark) * fraction)
        return result

    def _advance(self, state: list, now: float) -> None:
        rate, last_t, total, marks = state
        boundary = len(marks) * self.bucket_s
        while boundary <= now:
            marks.append(total + rate * (boundary - last_t))
            boundary += self.bucket_s
        state[1], state[2] = now, total + rate * (now - last_t)

    def _cumulative_at(self, state: list, moment: float) -> float:
        rate, last_t, total, marks = state
        if moment >= last_t:
            return total + rate * (moment - last_t)
        hour = int(moment // self.bucket_s)
        start = hour * self.bucket_s
        if hour + 1 < len(marks):
            end_value, end_t = marks[hour + 1], start + self.bucket_s
        else:
            end_value, end_t = total, last_t
        fraction = (moment - start) / (end_t - start) if end_t > start else 0.0
        return marks[hour] + (end_value - marks[hour]) * fraction


class DecayedUsage:
    """GPU-seconds per key, each weighed ``2 ** (-age / half_life)``.

    Between rate changes ``D(t) = D(t0) f + rate h / ln2 (1 - f)`` with ``f = 2 ** (-(t - t0) / h)``.
    """

    def __init__(self, half_life_s: float) -> None:
        self._decay = math.log(2) / half_life_s
        self._keys: dict[Hashable, list] = {}  # key -> [rate, last_t, decayed_at_last_t]

    def set_rate(self, key: Hashable, now: float, rate: float) -> None:
        state = self._keys.get(key)
        if state is None:
            self._keys[key] = [rate, now, 0.0]
            return
        state[2], state[1], state[0] = self._at(state, now), now, rate

    def value(self, key: Hashable, now: float) -> float:
        state = self._keys.get(key)
        return 0.0 if state is None else self._at(state, now)

    def values(self, keys: Iterable[Hashable], now: float) -> dict[Hashable, float]:
        """``{key: value(key, now)}``, in one loop (a snapshot reads every key each pass)."""
        found, decay, exp = self._keys.get, self._decay, math.exp
        result = {}
        for key in keys:
            state = found(key)
            if state is None:
                result[key] = 0.0
                continue
            rate, last_t, decayed = state  # _at, inlined
            factor = exp(-decay * (now - last_t))
            result[key] = decayed * factor + rate / decay * (1.0 - factor)
        return result

    def _at(self, state: list, now: float) -> float:
        rate, last_t, decayed = state
        factor = math.exp(-self._decay * (now - last_t))
        return decayed * factor + rate / self._decay * (1.0 - factor)
