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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    """One allocation's line of a :class:`Ledger`, whose lists hold its numbers (so an accrual
    adds to every allocation in one C-level loop):

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
        ledger, at = self._ledger, self._at
        ledger._demand[at] = gpus
        ledger._owing[at] = ledger._owed_rate(at)

    @property
    def running(self) -> int:
        return self._ledger._running[self._at]

    @running.setter
    def running(self, gpus: int) -> None:
        self._ledger._running[self._at] = gpus

    @property
    def owed_s(self) -> float:
        return self._ledger._owed[self._at]

    @property
    def delivered_s(self) -> float:
        return self._ledger._delivered[self._at]


@dataclass
class Ledger:
    """Running sums for one simulation; :meth:`accrue` is called before every change of state."""

    installed_gpus: int
    measure_from: float
    horizon: float
    fractions: Mapping[str, float]
    healthy_gpus: int = 0
    assigned_funded: int = 0
    assigned_unfunded: int = 0
    busy: float = 0.0  # GPUs really computing (sum of gpus * busy over running work)
    requested: int = 0  # GPUs of all workloads pending or running (demand, funded or not)
    last_t: float = 0.0
    totals: dict[str, float] = field(default_factory=dict)
    allocations: dict[str, AllocationLedger] = field(default_factory=dict)
    hourly: dict[int, list[float]] = field(default_factory=dict)  # hour -> [funded, unfunded, healthy] GPU-s
    # Per allocation, in the order of ``allocations``: what AllocationLedger reads and writes.
    # ``_owing`` is ``min(fraction * healthy, demand)`` at ``_owing_healthy`` healthy GPUs, or 0
    # without demand: adding ``0 * dt`` (0.0) leaves a sum as it was, as skipping it would.
    _fractions: list[float] = field(default_factory=list)
    _demand: list[int] = field(default_factory=list)
    _running: list[int] = field(default_factory=list)
    _owing: list[float] = field(default_factory=list)
    _owing_healthy: int = 0
    _owed: list[float] = field(default_factory=list)
    _delivered: list[float] = field(default_factory=list)

    def allocation(self, path: str) -> AllocationLedger:
        ledger = self.allocations.get(path)
        if ledger is None:
            fraction = self.fractions.get(path, 0.0)
            ledger = self.allocations[path] = AllocationLedger(fraction, self, len(self._owed))
            for numbers, zero in (
                (self._fractions, fraction),
                (self._demand, 0),
                (self._running, 0),
                (self._owing, 0),
                (self._owed, 0.0),
                (self._delivered, 0.0),
            ):
                numbers.append(zero)
        return ledger

    def _owed_rate(self, at: int) -> float:
        demand = self._demand[at]
        return min(self._fractions[at] * self._owing_healthy, demand) if demand else 0

    def accrue(self, now: float) -> None:
        start, end = max(self.last_t, self.measure_from), min(now, self.horizon)
        self.last_t = max(self.last_t, now)
        if end <= start:
            return
        self._accrue_totals(end - start)
        self._accrue_allocations(end - start)
        self._accrue_hourly(start, end)

    def _accrue_totals(self, dt: float) -> None:
        totals = self.totals
        for key, value in (
            ("installed", self.installed_gpus),
            ("healthy", self.healthy_gpus),
            ("funded", self.assigned_funded),
            ("unfunded", self.assigned_unfunded),
            ("busy", self.busy),
            ("requested", self.requested),
        ):
            totals[key] = totals.get(key, 0.0) + value * dt

    def _accrue_allocations(self, dt: float) -> None:
        """``owed_s += min(fraction * healthy, demand) * dt`` where there is demand and
        ``delivered_s += running * dt`` where work runs: the same products and sums, in C loops."""
        if self._owing_healthy != self.healthy_gpus:
            self._owing_healthy = self.healthy_gpus
            self._owing = [self._owed_rate(at) for at in range(len(self._owing))]
        self._owed = list(map(add, self._owed, map(mul, self._owing, repeat(dt))))
        self._delivered = list(map(add, self._delivered, map(mul, self._running, repeat(dt))))

    def _accrue_hourly(self, start: float, end: float) -> None:
        while start < end:
            hour = int((start - self.measure_from) // 3600)
            stop = min(end, self.measure_from + (hour + 1) * 3600)
            bucket = self.hourly.setdefault(hour, [0.0, 0.0, 0.0])
            bucket[0] += self.assigned_funded * (stop - start)
            bucket[1] += self.assigned_unfunded * (stop - start)
            bucket[2] += self.healthy_gpus * (stop - start)
            start = stop
