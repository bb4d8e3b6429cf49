"""The metrics pyramid (DESIGN 8), accumulated while the simulation runs.

Only the measured period ``[measure_from, horizon]`` counts. Between two events nothing changes,
so every integral is a sum of ``value * dt`` over those intervals:

- availability  = healthy GPU-seconds / installed GPU-seconds
- occupancy     = assigned GPU-seconds / healthy GPU-seconds; ``unallocated_share`` is the part of
  the assigned GPU-seconds that ran unfunded work
- owed(a)       = integral of min(entitlement(a), demand(a)) where demand is the GPUs of a's funded
  workloads that are pending or running, and entitlement(a) = fraction(a) * healthy GPUs
- delivered(a)  = integral of the GPUs a's funded workloads run
- impact        = sum over a of min(delivered, owed) / sum of owed; ``jain_index`` over
  x_a = min(delivered / owed, 1) is (sum x)^2 / (n * sum x^2), 1.0 when every team gets the same
- utilisation   = busy GPU-seconds / assigned GPU-seconds (idle-but-held work lowers it)
- occupancy when contended = assigned GPU-seconds / healthy GPU-seconds over the intervals in
  which the GPUs requested (pending or running, funded or not) exceed the healthy GPUs, i.e. in
  which the pending work wants more than the free GPUs: the capacity a policy leaves idle while
  work waits (fragmentation, reservations, preemption churn, passes not yet run)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from itertools import repeat
from operator import add, mul

from scheduling.policy import BudgetNodeSpec


def entitlement_fractions(tree: Sequence[BudgetNodeSpec], cluster_gpus: int) -> dict[str, float]:
    """Each budget node's fraction of the cluster's available GPUs (its entitlement / available).

    fraction(child) = fraction(parent) * budget(child) / max(budget(parent), sum of siblings'
    budgets); the roots divide the cluster the same way with the cluster's GPUs as the parent's
    budget. So budgets that add up to less than the parent leave the rest unallocated, and
    budgets that add up to more are scaled down to fit. Nodes with budget 0 get 0.
    """
    children: dict[str | None, list[BudgetNodeSpec]] = {}
    for spec in tree:
        children.setdefault(spec.parent, []).append(spec)
    fractions: dict[str, float] = {}
    stack: list[tuple[str | None, float, float]] = [(None, 1.0, float(cluster_gpus))]
    while stack:
        parent, parent_fraction, parent_budget = stack.pop()
        kids = children.get(parent, [])
        denominator = max(parent_budget, sum(kid.budget for kid in kids))
        for kid in kids:
            share = kid.budget / denominator if denominator > 0 else 0.0
            fractions[kid.path] = parent_fraction * share
            stack.append((kid.path, fractions[kid.path], kid.budget))
    return fractions


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def jain_index(values: Sequence[float]) -> float | None:
    squares = sum(value * value for value in values)
    return None if not values or squares == 0 else sum(values) ** 2 / (len(values) * squares)


class AllocationLedger:
    """One allocation's line of a :class:`Ledger`, whose lists hold its numbers:

    - ``demand``: GPUs of its funded workloads pending or running; ``running``: those running
    - ``owed_s``, ``delivered_s``: the integrals so far (see the module docstring)
    """

    __slots__ = ("fraction", "_ledger", "_at")

    def __init__(self, fraction: float, ledger: Ledger, at: int) -> None:
        self.fraction, self._ledger, self._at = fraction, ledger, at

    @property
    def demand(self) -> int:
        return self._ledger._demand[self._at]

    @demand.setter
    def demand(self, gpus: int) -> None:
        self._ledger._set_demand(self._at, gpus)

    @property
    def running(self) -> int:
        return self._ledger._running[self._at]

    @running.setter
    def running(self, gpus: int) -> None:
        self._ledger._set_running(self._at, gpus)

    @property
    def owed_s(self) -> float:
        self._ledger._catch_up(self._at)
        return self._ledger._owed[self._at]

    @property
    def delivered_s(self) -> float:
        self._ledger._catch_up(self._at)
        return self._ledger._delivered[self._at]


TOTALS = (
    "installed",
    "healthy",
    "funded",
    "unfunded",
    "busy",
    "requested",
    "contended_healthy",  # healthy GPU-seconds while requested > healthy
    "contended_assigned",  # assigned GPU-seconds at those times
)


@dataclass
class Ledger:
    """Running sums for one simulation; :meth:`accrue` is called before every change of state.

    Each accrual adds ``value * dt`` to the totals and the hourly buckets at once. The integrals
    per allocation are added late: an accrual only notes its ``dt``, and an allocation's line adds
    ``rate * dt`` for every ``dt`` noted since it last did so, in that order (one addition per
    interval, as adding at every accrual does), when its rate changes or its sums are read.
    Intervals in which its rate is 0 add nothing (adding ``0 * dt`` leaves a sum as it was).
    """

    installed_gpus: int
    measure_from: float
    horizon: float
    fractions: Mapping[str, float]
    # GPU counts, kept as floats (adding ints leaves them whole): their products with the
    # intervals are the ints', without Python's slower int-times-float path.
    healthy_gpus: float = 0.0
    assigned_funded: float = 0.0
    assigned_unfunded: float = 0.0
    busy: float = 0.0  # GPUs really computing (sum of gpus * busy over running work)
    requested: float = 0.0  # GPUs of all workloads pending or running (demand, funded or not)
    last_t: float = 0.0
    allocations: dict[str, AllocationLedger] = field(default_factory=dict)
    hourly: dict[int, list[float]] = field(default_factory=dict)  # hour -> [funded, unfunded, healthy] GPU-s
    # The totals' integrals, in the order of TOTALS (None until an accrual adds to them).
    _sums: list[float] | None = None
    # Per allocation, in the order of ``allocations``: what AllocationLedger reads and writes.
    # ``_owing`` is ``min(fraction * healthy, demand)`` at ``_owing_healthy`` healthy GPUs, or 0
    # without demand. ``_owed`` and ``_delivered`` hold the sums up to the first ``_since`` of
    # the intervals in ``_dts`` (every accrued interval's length, in order).
    _fractions: list[float] = field(default_factory=list)
    _demand: list[int] = field(default_factory=list)
    _running: list[int] = field(default_factory=list)
    _owing: list[float] = field(default_factory=list)
    _owing_healthy: float = 0
    _owed: list[float] = field(default_factory=list)
    _delivered: list[float] = field(default_factory=list)
    _since: list[int] = field(default_factory=list)
    _dts: list[float] = field(default_factory=list)

    @property
    def totals(self) -> dict[str, float]:
        """GPU-seconds per quantity of TOTALS over the measured period so far ({} before any)."""
        return {} if self._sums is None else dict(zip(TOTALS, self._sums, strict=True))

    def allocation(self, path: str) -> AllocationLedger:
        ledger = self.allocations.get(path)
        if ledger is None:
            fraction = self.fractions.get(path, 0.0)
            ledger = self.allocations[path] = AllocationLedger(fraction, self, len(self._owed))
            self._fractions.append(fraction)
            self._demand.append(0)
            self._running.append(0)
            self._owing.append(0)
            self._owed.append(0.0)
            self._delivered.append(0.0)
            self._since.append(len(self._dts))
        return ledger

    def add_demand(self, path: str, gpus: int) -> None:
        """``allocation(path).demand += gpus``, in one call."""
        at = self.allocation(path)._at
        self._set_demand(at, self._demand[at] + gpus)

    def add_running(self, path: str, gpus: int) -> None:
        """``allocation(path).running += gpus``, in one call."""
        at = self.allocation(path)._at
        self._set_running(at, self._running[at] + gpus)

    def _set_demand(self, at: int, gpus: int) -> None:
        self._catch_up(at)
        self._demand[at] = gpus
        self._owing[at] = self._owed_rate(at)

    def _set_running(self, at: int, gpus: int) -> None:
        self._catch_up(at)
        self._running[at] = gpus

    def _owed_rate(self, at: int) -> float:
        demand = self._demand[at]
        return min(self._fractions[at] * self._owing_healthy, demand) if demand else 0

    def _catch_up(self, at: int) -> None:
        """Add allocation ``at``'s rates times every interval noted since it last did, in order
        (``reduce`` makes the same additions, one per interval, as a loop would)."""
        dts, since = self._dts, self._since[at]
        if since == len(dts):
            return
        later = dts[since:] if since else dts
        owing, running = self._owing[at], self._running[at]
        # (as floats: the same products as the ints', without Python's slower int-times-float path)
        if owing:
            self._owed[at] = reduce(add, map(mul, repeat(float(owing)), later), self._owed[at])
        if running:
            self._delivered[at] = reduce(add, map(mul, repeat(float(running)), later), self._delivered[at])
        self._since[at] = len(dts)

    def accrue(self, now: float) -> None:
        if now <= self.last_t:
            return  # nothing passed (and last_t stays)
        start, end = max(self.last_t, self.measure_from), min(now, self.horizon)
        self.last_t = now
        if end <= start:
            return
        self._accrue_totals(end - start)
        self._accrue_allocations(end - start)
        self._accrue_hourly(start, end)

    def _accrue_totals(self, dt: float) -> None:
        sums = self._sums
        if sums is None:
            sums = self._sums = [0.0] * len(TOTALS)
        sums[0] += float(self.installed_gpus) * dt
        sums[1] += self.healthy_gpus * dt
        sums[2] += self.assigned_funded * dt
        sums[3] += self.assigned_unfunded * dt
        sums[4] += self.busy * dt
        sums[5] += self.requested * dt
        if self.requested > self.healthy_gpus:
            sums[6] += self.healthy_gpus * dt
            sums[7] += (self.assigned_funded + self.assigned_unfunded) * dt

    def _accrue_allocations(self, dt: float) -> None:
        """Note ``dt`` (see the class docstring); owed rates follow the healthy GPUs."""
        if self._owing_healthy != self.healthy_gpus:
            for at in range(len(self._owing)):
                self._catch_up(at)
            self._owing_healthy = self.healthy_gpus
            self._owing = [self._owed_rate(at) for at in range(len(self._owing))]
        self._dts.append(dt)

    def _accrue_hourly(self, start: float, end: float) -> None:
        while start < end:
            hour = int((start - self.measure_from) // 3600)
            stop = min(end, self.measure_from + (hour + 1) * 3600)
            bucket = self.hourly.setdefault(hour, [0.0, 0.0, 0.0])
            bucket[0] += self.assigned_funded * (stop - start)
            bucket[1] += self.assigned_unfunded * (stop - start)
            bucket[2] += self.healthy_gpus * (stop - start)
            start = stop
