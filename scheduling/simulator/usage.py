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
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)  # a table's keys (allocation paths, or (path, user) pairs)


class WindowedUsage:
    """GPU-seconds per key inside a sliding window, from hourly cumulative marks."""

    def __init__(self, window_s: float, bucket_s: float = 3600.0) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._keys: dict[Hashable, list] = {}  # key -> [rate, last_t, total_at_last_t, marks]
        self._tables: list[WindowedTable] = []  # told of every rate change (their cache goes stale)

    def table(self) -> WindowedTable[K]:
        """A new :class:`WindowedTable` over this usage (it lives as long as this object)."""
        table: WindowedTable[K] = WindowedTable(self)
        self._tables.append(table)
        return table

    def set_rate(self, key: Hashable, now: float, rate: float) -> None:
        """From ``now`` on, ``key`` runs ``rate`` GPUs."""
        for table in self._tables:
            if key in table._read:
                table._stale[key] = None
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = [0.0, now, 0.0, [0.0] * (int(now // self.bucket_s) + 1)]
        self._advance(state, now)
        state[0] = float(rate)  # the same products as an int's, without mixing ints and floats

    def value(self, key: Hashable, now: float) -> float:
        state = self._keys.get(key)
        if state is None:
            return 0.0
        low = now - self.window_s
        total_now = state[2] + state[0] * (now - state[1])
        return total_now if low <= 0 else total_now - self._cumulative_at(state, low)

    def values(self, keys: Iterable[K], now: float) -> dict[K, float]:
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


class WindowedTable(Generic[K]):
    """``usage.values(keys, now)`` for an ordered set of keys that changes a little between reads
    (one read per pass), recomputing only the keys whose value can have moved since the last read.

    Invariants, between reads: ``_read`` holds every key in order. A key that is neither stale
    nor moving has there exactly what ``values`` gives at any moment until its rate changes or
    the window's start enters another hour (or passes 0): it runs nothing (rate 0) and the window
    starts before anything it ran (the value is its total), after it stopped (0.0), or in an hour
    in which it ran nothing (the hour's interpolation adds 0.0). Every other key is moving: in
    ``_linear`` (the window starts at or before 0: ``values`` reads ``total + rate * (now - t)``),
    ``_banded`` (the window starts in a closed hour: what ``values`` reads from the hour's marks,
    which stay put until the hour or the rate changes) or ``_other`` (recomputed by ``values``).
    The fast loops make the same operations, in the same order, as ``values``. A rate change
    (``set_rate``) or a new hour makes a key stale: it is classified again at the next read.
    """

    def __init__(self, usage: WindowedUsage) -> None:
        self._usage = usage
        self._read: dict[K, float] = {}  # every key, in order; exact unless moving or stale
        self._linear: dict[K, tuple[float, float, float]] = {}  # rate, last_t, total
        self._banded: dict[K, tuple[float, float, float, float, float]] = {}  # + mark, step
        self._other: dict[K, None] = {}
        self._stale: dict[K, None] = {}
        self._hour: int | None = None  # the hour the window starts in (-1: at or before 0)

    def __contains__(self, key: K) -> bool:
        return key in self._read

    def add(self, key: K) -> None:
        """Read ``key`` too, after the keys read so far."""
        if key in self._read:
            raise ValueError(f"{key!r} is read already")
        self._read[key] = 0.0
        self._stale[key] = None

    def remove(self, key: K) -> None:
        """Stop reading ``key`` (the others keep their order)."""
        del self._read[key]
        self._forget(key)
        self._stale.pop(key, None)

    def _forget(self, key: K) -> None:
        self._linear.pop(key, None)
        self._banded.pop(key, None)
        self._other.pop(key, None)

    def read(self, now: float) -> dict[K, float]:
        """``usage.values(keys, now)`` for the keys added and not removed, in the order added."""
        usage, read = self._usage, self._read
        low = now - usage.window_s
        hour = -1 if low <= 0 else int(low // usage.bucket_s)
        stale: dict[K, None] | dict[K, float] = self._stale
        if hour != self._hour:
            self._hour, stale = hour, read
            self._linear, self._banded, self._other = {}, {}, {}
        if stale:
            self._classify(usage.values(stale, now), low, hour)
            self._stale = {}
        result = read.copy()
        if hour < 0:
            for key, (rate, last_t, total) in self._linear.items():
                result[key] = total + rate * (now - last_t)
        else:
            start = hour * usage.bucket_s
            end = start + usage.bucket_s
            whole = (low - start) / (end - start) if end > start else 0.0
            for key, (rate, last_t, total, mark, step) in self._banded.items():
                result[key] = total + rate * (now - last_t) - (mark + step * whole)
        if self._other:
            result.update(usage.values(self._other, now))
        return result

    def _classify(self, values: dict[K, float], low: float, hour: int) -> None:
        """File each key of ``values`` (worked out at ``low + window``) as fixed or moving."""
        found, read = self._usage._keys.get, self._read
        linear, banded, other = self._linear, self._banded, self._other
        for key, value in values.items():
            linear.pop(key, None)  # _forget, inlined
            banded.pop(key, None)
            other.pop(key, None)
            state = found(key)
            if state is None:
                read[key] = value
                continue
            rate, last_t, total, marks = state
            if hour < 0:
                if rate:
                    linear[key] = (rate, last_t, total)
                else:
                    read[key] = value
            elif low >= last_t:
                if rate:
                    other[key] = None
                else:
                    read[key] = value
            elif hour + 1 < len(marks):
                mark = marks[hour]
                step = marks[hour + 1] - mark
                if rate or step:
                    banded[key] = (rate, last_t, total, mark, step)
                else:
                    read[key] = value
            elif rate or total != marks[hour]:
                other[key] = None
            else:
                read[key] = value


class DecayedUsage:
    """GPU-seconds per key, each weighed ``2 ** (-age / half_life)``.

    Between rate changes ``D(t) = D(t0) f + rate h / ln2 (1 - f)`` with ``f = 2 ** (-(t - t0) / h)``.
    """

    def __init__(self, half_life_s: float) -> None:
        self._decay = math.log(2) / half_life_s
        self._keys: dict[Hashable, list] = {}  # key -> [rate, last_t, decayed_at_last_t]

    def table(self) -> DecayedTable[K]:
        """A new :class:`DecayedTable` over this usage."""
        return DecayedTable(self)

    def set_rate(self, key: Hashable, now: float, rate: float) -> None:
        state = self._keys.get(key)
        if state is None:
            self._keys[key] = [float(rate), now, 0.0]
            return
        state[2], state[1], state[0] = self._at(state, now), now, float(rate)

    def value(self, key: Hashable, now: float) -> float:
        state = self._keys.get(key)
        return 0.0 if state is None else self._at(state, now)

    def values(self, keys: Iterable[K], now: float) -> dict[K, float]:
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


class DecayedTable(Generic[K]):
    """What :class:`WindowedTable` is for :class:`DecayedUsage`: every value decays with time, so
    every read recomputes every key."""

    def __init__(self, usage: DecayedUsage) -> None:
        self._usage = usage
        self._keys: dict[K, None] = {}

    def __contains__(self, key: K) -> bool:
        return key in self._keys

    def add(self, key: K) -> None:
        if key in self._keys:
            raise ValueError(f"{key!r} is read already")
        self._keys[key] = None

    def remove(self, key: K) -> None:
        del self._keys[key]

    def read(self, now: float) -> dict[K, float]:
        return self._usage.values(self._keys, now)
