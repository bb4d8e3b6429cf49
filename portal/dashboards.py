"""What each page shows, assembled from the reads (numbers) and portal.charts (figures).

The API serializes the same objects (portal.api), so a page and its endpoint never disagree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q, Sum
from django.utils.safestring import SafeString

from budgets.models import BudgetNode, Membership
from budgets.paths import in_subtree
from budgets.selectors import User, cluster_list
from portal import charts, metrics
from scheduling.models import (
    AllocationHour,
    Cluster,
    SchedulingPass,
    UtilisationSample,
    Workload,
    WorkloadState,
)

ACTIVE = (WorkloadState.PENDING, WorkloadState.RUNNING)
SQUATTING_BELOW = 10.0  # percent busy: a running workload below this is idle but holding GPUs


# --- home ------------------------------------------------------------------------------------------------


@dataclass
class AllocationLine:
    node: BudgetNode
    cluster: Cluster
    role: str
    delivered_gpu_h: float
    owed_gpu_h: float

    @property
    def ratio(self) -> float | None:
        return metrics.ratio(self.delivered_gpu_h, self.owed_gpu_h)

    @property
    def below_target(self) -> bool:
        return not metrics.meets_budget(self.delivered_gpu_h, self.owed_gpu_h)


@dataclass
class HomeBoard:
    workloads: list[Workload]
    state_counts: dict[str, int]
    allocations: list[AllocationLine]
    pyramids: list[tuple[Cluster, metrics.PyramidNow]]
    memberships: list[Membership] = field(default_factory=list)
    days: int = 7


def my_workloads_filter(user: User) -> Q:
    return Q(owner_id=user.pk) | Q(user_name=user.get_username())


def home_board(*, user: User, now: datetime, days: int = 7) -> HomeBoard:
    """Live work through the (cluster, state) index, recent finished work through the owner index:
    neither read scans the whole workload history."""
    clusters = list(cluster_list())
    live = list(
        Workload.objects.filter(cluster_id__in=[c.pk for c in clusters], state__in=ACTIVE)
        .filter(my_workloads_filter(user))
        .select_related("cluster", "allocation", "pending_reason")
        .order_by("-state_changed_at", "-id")
    )
    finished = list(
        Workload.objects.filter(owner_id=user.pk)
        .exclude(state__in=ACTIVE)
        .select_related("cluster", "allocation")
        .order_by("-state_changed_at", "-id")[:5]
    )
    memberships = list(
        Membership.objects.filter(user_id=user.pk, node__archived=False).select_related("node")  # type: ignore[misc]  # anonymous: None matches nothing
    )
    return HomeBoard(
        workloads=live[:15] + finished,
        state_counts={state: sum(w.state == state for w in live) for state in ACTIVE},
        allocations=my_allocations(user=user, memberships=memberships, clusters=clusters, now=now, days=days),
        pyramids=[(c, metrics.pyramid_now(cluster=c, now=now, days=days)) for c in clusters],
        memberships=memberships,
        days=days,
    )


def my_allocations(
    *, user: User, memberships: list[Membership], clusters: list[Cluster], now: datetime, days: int
) -> list[AllocationLine]:
    """Delivered / owed over ``days`` for each node the user holds a role on (staff: the top level)."""
    held = [(m.node, m.role) for m in memberships]
    if not held and user.is_staff:
        held = [(node, "staff") for node in BudgetNode.objects.filter(parent__isnull=True, archived=False)]
    if not held:
        return []
    start, end = metrics.period_bounds(now=now, days=days)
    totals: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    rows = (
        AllocationHour.objects.filter(hour__gte=start, hour__lt=end, allocation__isnull=False)
        .values("cluster_id", "allocation__path")
        .annotate(d=Sum("delivered_gpu_s"), o=Sum("owed_gpu_s"))
        .values_list("cluster_id", "allocation__path", "d", "o")
    )
    for cluster_id, path, delivered, owed in rows:
        totals[(cluster_id, path)] = [(delivered or 0.0) / 3600, (owed or 0.0) / 3600]
    lines = []
    for node, role in sorted(held, key=lambda item: item[0].path):
        for cluster in clusters:
            inside = [v for (c, p), v in totals.items() if c == cluster.pk and in_subtree(p, node.path)]
            lines.append(
                AllocationLine(node, cluster, role, sum(v[0] for v in inside), sum(v[1] for v in inside))
            )
    return lines


# --- the pyramid -----------------------------------------------------------------------------------------


@dataclass
class PyramidBoard:
    cluster: Cluster
    days: int
    now: metrics.PyramidNow
    series: metrics.PyramidSeries
    unhealthy_nodes: list
    squatting: list[dict]
    most_preempted: list[Workload]
    recent_passes: list[SchedulingPass]
    charts: dict[str, SafeString] = field(default_factory=dict)


def pyramid_board(*, cluster: Cluster, now: datetime, days: int, with_charts: bool = True) -> PyramidBoard:
    """The pyramid page's content; the API asks for it ``with_charts=False``."""
    series = metrics.pyramid_series(cluster=cluster, now=now, days=days)
    board = PyramidBoard(
        cluster=cluster,
        days=days,
        now=metrics.pyramid_now(cluster=cluster, now=now, days=days),
        series=series,
        unhealthy_nodes=list(cluster.nodes.filter(healthy=False).order_by("name")),
        squatting=squatting_workloads(cluster=cluster, now=now),
        most_preempted=most_preempted(cluster=cluster),
        recent_passes=list(
            SchedulingPass.objects.filter(cluster=cluster).order_by("-started_at", "-id")[:10]
        ),
    )
    if with_charts:
        board.charts = pyramid_charts(series)
    return board


def pyramid_charts(series: metrics.PyramidSeries) -> dict[str, SafeString]:
    def pct(values: list[float | None]) -> list[float | None]:
        return [None if v is None else round(v * 100, 2) for v in values]

    return {
        "levels": charts.line_chart(
            div_id="chart-pyramid",
            x=series.x,
            series={
                "Availability": pct(series.availability),
                "Impact (delivered / owed)": pct(series.impact),
                "Utilization": pct(series.utilization),
            },
            y_title="%",
        ),
        "occupancy": charts.line_chart(
            div_id="chart-occupancy",
            x=series.x,
            series={
                "Allocated (funded)": pct(series.occupancy_allocated),
                "Unallocated (unfunded)": pct(series.occupancy_unallocated),
            },
            y_title="% of healthy GPU-hours",
            stacked=("Allocated (funded)", "Unallocated (unfunded)"),
        ),
        "passes": charts.line_chart(
            div_id="chart-passes",
            x=series.x,
            series={"Mean pass (ms)": series.pass_mean_ms, "Slowest pass (ms)": series.pass_max_ms},
            y_title="ms",
            dashed=("Slowest pass (ms)",),
            height=240,
        ),
    }


def squatting_workloads(*, cluster: Cluster, now: datetime, limit: int = 20) -> list[dict]:
    """Running workloads whose GPUs were mostly idle in the last 30 minutes of telemetry."""
    from datetime import timedelta

    rows = (
        UtilisationSample.objects.filter(
            cluster=cluster, at__gte=now - timedelta(minutes=30), workload__state=WorkloadState.RUNNING
        )
        .values("workload_id", "workload__name", "workload__user_name", "workload__allocation__path")
        .annotate(busy=Sum("gpu_utilisation") / Count("id"), gpus=Sum("gpus") / Count("id"))
        .filter(busy__lt=SQUATTING_BELOW)
        .order_by("busy", "workload_id")[:limit]
    )
    return [dict(row) for row in rows]


def most_preempted(*, cluster: Cluster, limit: int = 10) -> list[Workload]:
    """Live workloads (pending or running) requeued most often."""
    return list(
        Workload.objects.filter(cluster=cluster, state__in=ACTIVE, requeue_count__gt=0)
        .select_related("allocation")
        .order_by("-requeue_count", "id")[:limit]
    )


# --- queue waits -----------------------------------------------------------------------------------------


@dataclass
class WaitsBoard:
    cluster: Cluster
    days: int
    report: metrics.WaitReport
    charts: dict[str, SafeString] = field(default_factory=dict)


def waits_board(*, cluster: Cluster, now: datetime, days: int) -> WaitsBoard:
    report = metrics.wait_report(cluster=cluster, now=now, days=days)

    def minutes(values: list[float | None]) -> list[float | None]:
        return [None if v is None else round(v / 60, 2) for v in values]

    lines = {f"{name} p50": minutes(v) for name, v in report.p50_by_class.items()}
    lines |= {f"{name} p90": minutes(v) for name, v in report.p90_by_class.items()}
    palette = dict(zip(report.p50_by_class, charts.PALETTE, strict=False))
    colors = {line: palette[line.rsplit(" ", 1)[0]] for line in lines}
    board = WaitsBoard(cluster=cluster, days=days, report=report)
    board.charts = {
        "waits": charts.line_chart(
            div_id="chart-waits", x=report.x, series=lines, y_title="wait (minutes)",
            dashed=[name for name in lines if name.endswith("p90")], colors=colors,
        ),
        "preemptions": charts.line_chart(
            div_id="chart-preemptions", x=report.x,
            series={"Preemptions": report.preemptions_series, "GPU-hours lost": report.lost_gpu_h_series},
            y_title="count / GPU-hours", height=240,
        ),
    }  # fmt: skip
    return board
