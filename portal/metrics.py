"""The metrics pyramid and queue waits (DESIGN 8): pure formulas, then reads over the hourly rollups.

Formulas (each returns None when its denominator is 0, so "no data" never reads as 0%):
- availability = healthy GPU-hours / installed GPU-hours                       range 0..1
- occupancy    = assigned GPU-hours / healthy GPU-hours, split allocated (funded) and unallocated
- impact       = delivered / owed; an allocation "meets its budget" at >= 95%  (can exceed 1)
- utilization  = sum(gpus x busy fraction) / sum(gpus) over telemetry samples range 0..1
Reads touch only ``AllocationHour``, ``ClusterHour``, ``WaitHour`` and the live node/run state,
never the history of runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import Aggregate, F, Max, Q, QuerySet, Sum
from django.db.models.functions import TruncDay

from portal.models import WAIT_BIN_FIELDS, WAIT_EDGES_S, ClusterHour, WaitHour
from scheduling.accounting import HOUR, hour_floor
from scheduling.models import AllocationHour, Cluster, Node, Run

MEETS_BUDGET = 0.95
PERIODS_DAYS = (7, 30, 90)


# --- pure formulas ---------------------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def meets_budget(delivered: float, owed: float) -> bool:
    """Delivered at least 95% of owed; an allocation that was owed nothing trivially meets it."""
    return owed <= 0 or delivered >= MEETS_BUDGET * owed


def count_meeting_budget(pairs: Iterable[tuple[float, float]]) -> tuple[int, int]:
    """(allocations at >= 95%, allocations that were owed anything) over (delivered, owed) pairs."""
    owed_pairs = [(delivered, owed) for delivered, owed in pairs if owed > 0]
    return sum(meets_budget(d, o) for d, o in owed_pairs), len(owed_pairs)


def fair_share_ratio(
    *, usage: float, budget: float, sibling_usage: float, sibling_budget: float
) -> float | None:
    """usage share / budget share among siblings (DESIGN 2): < 1 under-served, > 1 over-served.

    None when the node has no budget share (unfunded) or nobody among its siblings used anything.
    """
    budget_share = ratio(budget, sibling_budget)
    usage_share = ratio(usage, sibling_usage)
    if not budget_share or usage_share is None:
        return None
    return usage_share / budget_share


def percentile(histogram: Sequence[int], q: float, edges: Sequence[float] = WAIT_EDGES_S) -> float | None:
    """The q-quantile (0..1) of a histogram over ``edges``, linear inside the bin that holds it.

    The last bin is open-ended: a quantile that falls in it reports its lower edge (a floor, and
    says so on the page as "> N h"). Empty histogram: None.
    """
    total = sum(histogram)
    if total == 0:
        return None
    target, seen = q * total, 0
    for index, count in enumerate(histogram):
        if count and seen + count >= target:
            low = edges[index]
            if index + 1 >= len(edges):
                return float(low)
            return low + (edges[index + 1] - low) * (target - seen) / count
        seen += count
    return float(edges[-1])


def merge_histograms(histograms: Iterable[Sequence[int]], size: int = len(WAIT_EDGES_S)) -> list[int]:
    merged = [0] * size
    for histogram in histograms:
        for index, count in enumerate(histogram[:size]):
            merged[index] += count
    return merged


def bucket_start(hour: datetime, *, days: int) -> datetime:
    """Series points: hourly up to 7 days, 6-hourly up to 30, daily beyond (at most ~360 points)."""
    if days <= 7:
        return hour
    step = 6 if days <= 30 else 24
    return hour.replace(hour=hour.hour - hour.hour % step)


# --- the pyramid -------------------------------------------------------------------------------------


@dataclass
class PyramidNow:
    """The four numbers on the on-call's first screen, and what they are made of."""

    installed_gpus: int
    healthy_gpus: int
    funded_gpus: int
    unfunded_gpus: int
    delivered_gpu_h: float
    owed_gpu_h: float
    allocations_meeting: int
    allocations_owed: int
    utilization: float | None

    @property
    def availability(self) -> float | None:
        return ratio(self.healthy_gpus, self.installed_gpus)

    @property
    def occupancy(self) -> float | None:
        return ratio(self.funded_gpus + self.unfunded_gpus, self.healthy_gpus)

    @property
    def occupancy_allocated(self) -> float | None:
        return ratio(self.funded_gpus, self.healthy_gpus)

    @property
    def occupancy_unallocated(self) -> float | None:
        return ratio(self.unfunded_gpus, self.healthy_gpus)

    @property
    def impact(self) -> float | None:
        return ratio(self.delivered_gpu_h, self.owed_gpu_h)


@dataclass
class PyramidSeries:
    x: list[datetime] = field(default_factory=list)
    availability: list[float | None] = field(default_factory=list)
    occupancy_allocated: list[float | None] = field(default_factory=list)
    occupancy_unallocated: list[float | None] = field(default_factory=list)
    impact: list[float | None] = field(default_factory=list)
    utilization: list[float | None] = field(default_factory=list)
    pass_mean_ms: list[float | None] = field(default_factory=list)
    pass_max_ms: list[float] = field(default_factory=list)
    # Sums over the whole period, for the occupancy card: the chart's definition over its period.
    healthy_gpu_s: float = 0.0
    used_gpu_s: float = 0.0
    delivered_gpu_s: float = 0.0

    @property
    def period_occupancy(self) -> float | None:
        """Assigned GPU-hours / healthy GPU-hours over the period (what the occupancy chart plots)."""
        return ratio(self.used_gpu_s, self.healthy_gpu_s)

    @property
    def period_occupancy_allocated(self) -> float | None:
        return ratio(self.delivered_gpu_s, self.healthy_gpu_s)

    @property
    def period_occupancy_unallocated(self) -> float | None:
        return ratio(max(self.used_gpu_s - self.delivered_gpu_s, 0.0), self.healthy_gpu_s)


def period_bounds(*, now: datetime, days: int) -> tuple[datetime, datetime]:
    """[start, end) of whole hours covering the last ``days`` days up to and including this hour."""
    end = hour_floor(now) + HOUR
    return end - timedelta(days=days), end


def pyramid_now(*, cluster: Cluster, now: datetime, days: int = 7) -> PyramidNow:
    """Availability and occupancy from the live state; impact over ``days``; utilization over the last 2 h."""
    nodes = Node.objects.filter(cluster=cluster).aggregate(
        installed_gpus=Sum("gpus", default=0), healthy_gpus=Sum("gpus", filter=Q(healthy=True), default=0)
    )
    running = Run.objects.filter(cluster=cluster, ended_at__isnull=True).aggregate(
        funded_gpus=Sum("gpus", filter=Q(funded=True), default=0),
        unfunded_gpus=Sum("gpus", filter=Q(funded=False), default=0),
    )
    meeting, owed_count, delivered, owed = _impact(cluster=cluster, now=now, days=days)
    recent = ClusterHour.objects.filter(cluster=cluster, hour__gte=hour_floor(now) - HOUR).aggregate(
        busy=Sum("busy_gpus", default=0.0), sampled=Sum("sampled_gpus", default=0.0)
    )
    return PyramidNow(
        installed_gpus=nodes["installed_gpus"],
        healthy_gpus=nodes["healthy_gpus"],
        funded_gpus=running["funded_gpus"],
        unfunded_gpus=running["unfunded_gpus"],
        delivered_gpu_h=delivered / 3600,
        owed_gpu_h=owed / 3600,
        allocations_meeting=meeting,
        allocations_owed=owed_count,
        utilization=ratio(recent["busy"], recent["sampled"]),
    )


def _impact(*, cluster: Cluster, now: datetime, days: int) -> tuple[int, int, float, float]:
    start, end = period_bounds(now=now, days=days)
    per_allocation = list(
        AllocationHour.objects.filter(
            cluster=cluster, hour__gte=start, hour__lt=end, allocation__isnull=False
        )
        .values("allocation_id")
        .annotate(delivered=Sum("delivered_gpu_s"), owed=Sum("owed_gpu_s"))
        .values_list("delivered", "owed")
    )
    meeting, owed_count = count_meeting_budget(per_allocation)
    return meeting, owed_count, sum(d for d, _ in per_allocation), sum(o for _, o in per_allocation)


def per_bucket(queryset: QuerySet, *, days: int, **aggregates: Aggregate) -> QuerySet:
    """``(bucket, aggregates...)`` rows summed in the database: per hour up to 30 days, per day beyond
    (so a 90-day page reads 90 rows, not 2,160). :func:`bucket_start` then folds hours into 6-hour points."""
    bucket = TruncDay("hour", tzinfo=UTC) if days > 30 else F("hour")
    return queryset.annotate(bucket=bucket).values("bucket").annotate(**aggregates).order_by("bucket")


_CLUSTER_SUMS = (
    "installed_gpu_s",
    "healthy_gpu_s",
    "busy_gpus",
    "sampled_gpus",
    "pass_count",
    "pass_total_ms",
)


def pyramid_series(*, cluster: Cluster, now: datetime, days: int) -> PyramidSeries:
    """The four levels (and pass durations) per bucket over the last ``days`` days."""
    start, end = period_bounds(now=now, days=days)
    sums: dict[datetime, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    hours = ClusterHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    for row in per_bucket(
        hours, days=days, **{n: Sum(n) for n in _CLUSTER_SUMS}, pass_max=Max("pass_max_ms")
    ):
        bucket = sums[bucket_start(row["bucket"], days=days)]
        for name in _CLUSTER_SUMS:
            bucket[name] += row[name] or 0.0
        bucket["pass_max_ms"] = max(bucket["pass_max_ms"], row["pass_max"] or 0.0)
    usage = AllocationHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    for row in per_bucket(
        usage, days=days, used=Sum("used_gpu_s"), delivered=Sum("delivered_gpu_s"), owed=Sum("owed_gpu_s")
    ):
        bucket = sums[bucket_start(row["bucket"], days=days)]
        for name in ("used", "delivered", "owed"):
            bucket[name] += row[name] or 0.0
    return _series_from_sums(sums)


def _series_from_sums(sums: Mapping[datetime, Mapping[str, float]]) -> PyramidSeries:
    series = PyramidSeries()
    for moment in sorted(sums):
        bucket = sums[moment]
        healthy = bucket.get("healthy_gpu_s", 0.0)
        delivered, used = bucket.get("delivered", 0.0), bucket.get("used", 0.0)
        series.x.append(moment)
        series.availability.append(ratio(healthy, bucket.get("installed_gpu_s", 0.0)))
        series.occupancy_allocated.append(ratio(delivered, healthy))
        series.occupancy_unallocated.append(ratio(max(used - delivered, 0.0), healthy))
        series.impact.append(ratio(delivered, bucket.get("owed", 0.0)))
        series.utilization.append(ratio(bucket.get("busy_gpus", 0.0), bucket.get("sampled_gpus", 0.0)))
        series.pass_mean_ms.append(ratio(bucket.get("pass_total_ms", 0.0), bucket.get("pass_count", 0.0)))
        series.pass_max_ms.append(bucket.get("pass_max_ms", 0.0))
        series.healthy_gpu_s += healthy
        series.used_gpu_s += used
        series.delivered_gpu_s += delivered
    return series


# --- queue waits ---------------------------------------------------------------------------------------


@dataclass
class WaitStats:
    workload_class: str
    starts: int
    p50_s: float | None
    p90_s: float | None


@dataclass
class WaitReport:
    classes: list[WaitStats]
    x: list[datetime]
    p50_by_class: dict[str, list[float | None]]
    p90_by_class: dict[str, list[float | None]]
    preemptions: int
    requeues: int
    lost_gpu_h: float
    preemptions_series: list[int]
    lost_gpu_h_series: list[float]


def wait_report(*, cluster: Cluster, now: datetime, days: int) -> WaitReport:
    """p50/p90 wait per workload class over the period and per bucket; preemptions and loss."""
    start, end = period_bounds(now=now, days=days)
    histograms: dict[str, dict[datetime, list[int]]] = defaultdict(dict)
    hours = WaitHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    bucket = TruncDay("hour", tzinfo=UTC) if days > 30 else F("hour")
    rows = (
        hours.annotate(bucket=bucket)
        .values_list("workload_class", "bucket")
        .annotate(*(Sum(name) for name in WAIT_BIN_FIELDS))
        .order_by("workload_class", "bucket")
    )
    for workload_class, moment, *counts in rows:
        per_bucket = histograms[workload_class]
        key = bucket_start(moment, days=days)
        previous = per_bucket.get(key)
        per_bucket[key] = [a + b for a, b in zip(previous, counts, strict=True)] if previous else counts
    preempted = _preemption_series(cluster=cluster, start=start, end=end, days=days)
    x = sorted({moment for per_class in histograms.values() for moment in per_class} | set(preempted))
    return WaitReport(
        classes=[_class_stats(name, per_bucket.values()) for name, per_bucket in sorted(histograms.items())],
        x=x,
        p50_by_class={
            name: [percentile(b.get(m, []), 0.5) for m in x] for name, b in sorted(histograms.items())
        },
        p90_by_class={
            name: [percentile(b.get(m, []), 0.9) for m in x] for name, b in sorted(histograms.items())
        },
        preemptions=sum(p for p, _, _ in preempted.values()),
        requeues=sum(r for _, r, _ in preempted.values()),
        lost_gpu_h=sum(lost for _, _, lost in preempted.values()),
        preemptions_series=[preempted.get(m, (0, 0, 0.0))[0] for m in x],
        lost_gpu_h_series=[preempted.get(m, (0, 0, 0.0))[2] for m in x],
    )


def _class_stats(name: str, histograms: Iterable[list[int]]) -> WaitStats:
    merged = merge_histograms(histograms)
    return WaitStats(name, sum(merged), percentile(merged, 0.5), percentile(merged, 0.9))


def _preemption_series(
    *, cluster: Cluster, start: datetime, end: datetime, days: int
) -> dict[datetime, tuple[int, int, float]]:
    """Bucket -> (preemptions, requeues, GPU-hours lost)."""
    result: dict[datetime, tuple[int, int, float]] = {}
    hours = ClusterHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    rows = per_bucket(hours, days=days, p=Sum("preemptions"), r=Sum("requeues"), lost=Sum("lost_gpu_s"))
    for hour, preemptions, requeues, lost in rows.values_list("bucket", "p", "r", "lost"):
        moment = bucket_start(hour, days=days)
        p, r, lost_h = result.get(moment, (0, 0, 0.0))
        result[moment] = (p + preemptions, r + requeues, lost_h + lost / 3600)
    return result
