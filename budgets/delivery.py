"""Delivery against allocation: owed vs delivered GPU-hours for one budget node's subtree.

Reads only rollups (hourly ``AllocationHour`` and ``portal.ClusterHour``, daily ``portal.PendingDay``)
plus the tree, in a fixed number of queries whatever the period; tests pin the count.

- delivered, owed: sums over the node's subtree (DESIGN 2); a node's own work counts too.
- entitlement line: the node's entitlement fraction today (its budget's chain of shares, from
  ``budgets.selectors.budget_tree``) times the healthy GPUs of each hour. Budget changes inside the
  period are not replayed: the line shows what today's budget would have entitled it to.
- where undelivered owed time went: undelivered = max(owed - delivered, 0), split in proportion
  to the GPU-seconds its funded work spent pending per cause (and lost to preemption).
  "No demand" is entitled time nobody in the subtree asked for: max(entitled - owed, 0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Sum

from budgets.models import Allocation, BudgetNode
from budgets.paths import below
from budgets.selectors import User, budget_tree
from portal.metrics import bucket_start, meets_budget, per_bucket, period_bounds, ratio
from portal.models import ClusterHour, PendingCause, PendingDay
from portal.rollups import day_floor
from scheduling.models import AllocationHour, Cluster
from scheduling.reports import fair_share_now

NO_DEMAND = "no_demand"
CAUSE_LABELS: dict[str, str] = {
    NO_DEMAND: "No demand (entitled, nothing to run)",
    PendingCause.WAITING: "Waiting behind others",
    PendingCause.FRAGMENTATION: "Fragmentation",
    PendingCause.PREEMPTION: "Preemption",
    PendingCause.UNHEALTHY: "Unhealthy nodes",
    PendingCause.OTHER: "Held, limits or unfunded",
}


@dataclass
class ChildDelivery:
    node: BudgetNode
    gpus: float
    delivered_gpu_h: float
    owed_gpu_h: float

    @property
    def ratio(self) -> float | None:
        return ratio(self.delivered_gpu_h, self.owed_gpu_h)

    @property
    def below_target(self) -> bool:
        return not meets_budget(self.delivered_gpu_h, self.owed_gpu_h)


@dataclass
class Delivery:
    node: BudgetNode
    cluster: Cluster
    days: int
    gpus: float
    entitlement_gpus: float
    fair_share_ratio: float | None
    delivered_gpu_h: float = 0.0
    owed_gpu_h: float = 0.0
    entitled_gpu_h: float = 0.0
    x: list[datetime] = field(default_factory=list)
    delivered_gpus: list[float] = field(default_factory=list)
    owed_gpus: list[float] = field(default_factory=list)
    entitlement_series: list[float] = field(default_factory=list)
    children: list[ChildDelivery] = field(default_factory=list)
    causes: list[tuple[str, str, float]] = field(default_factory=list)  # (cause, label, GPU-hours)

    @property
    def ratio(self) -> float | None:
        return ratio(self.delivered_gpu_h, self.owed_gpu_h)

    @property
    def undelivered_gpu_h(self) -> float:
        return max(self.owed_gpu_h - self.delivered_gpu_h, 0.0)


def attribute_undelivered(*, undelivered: float, weights: Mapping[str, float]) -> dict[str, float]:
    """Split ``undelivered`` over causes in proportion to ``weights`` (all zero: to OTHER).

    The parts always sum to ``undelivered``; negative weights count as 0.
    """
    positive = {cause: max(weight, 0.0) for cause, weight in weights.items()}
    total = sum(positive.values())
    if total <= 0:
        return {PendingCause.OTHER: undelivered} if undelivered > 0 else {}
    return {cause: undelivered * weight / total for cause, weight in positive.items() if weight > 0}


def subtree_ids(nodes: list[BudgetNode], root: BudgetNode) -> list[int]:
    return [n.pk for n in nodes if n.pk == root.pk or below(n.path, root.path)]


def delivery_report(*, node: BudgetNode, cluster: Cluster, user: User, now: datetime, days: int) -> Delivery:
    """Everything the delivery page shows for ``node`` on ``cluster`` over the last ``days`` days."""
    nodes = list(BudgetNode.objects.filter(archived=False).only("id", "name", "path", "parent_id", "slug"))
    budgets = {
        k: float(v) for k, v in Allocation.objects.filter(cluster=cluster).values_list("node_id", "gpus")
    }
    tree = budget_tree(cluster=cluster, user=user)
    row = tree.row_for(node.pk)
    report = Delivery(
        node=node,
        cluster=cluster,
        days=days,
        gpus=budgets.get(node.pk, 0.0),
        entitlement_gpus=float(row.entitlement) if row else 0.0,
        fair_share_ratio=fair_share_now(cluster=cluster, now=now).get(node.path),
    )
    start, end = period_bounds(now=now, days=days)
    ids = subtree_ids(nodes, node)
    fraction = ratio(report.entitlement_gpus, float(tree.healthy_gpus)) or 0.0
    _fill_series(report, cluster=cluster, ids=ids, start=start, end=end, fraction=fraction, now=now)
    report.children = _children(node, nodes, budgets, cluster=cluster, start=start, end=end)
    report.causes = _causes(report, cluster=cluster, ids=ids, start=start, end=end)
    return report


def _fill_series(
    report: Delivery,
    *,
    cluster: Cluster,
    ids: list[int],
    start: datetime,
    end: datetime,
    fraction: float,
    now: datetime,
) -> None:
    sums: dict[datetime, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    usage = AllocationHour.objects.filter(
        cluster=cluster, allocation_id__in=ids, hour__gte=start, hour__lt=end
    )
    for row in per_bucket(usage, days=report.days, d=Sum("delivered_gpu_s"), o=Sum("owed_gpu_s")):
        bucket = sums[bucket_start(row["bucket"], days=report.days)]
        bucket["delivered"] += row["d"] or 0.0
        bucket["owed"] += row["o"] or 0.0
    health = ClusterHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    for row in per_bucket(health, days=report.days, healthy=Sum("healthy_gpu_s")):
        sums[bucket_start(row["bucket"], days=report.days)]["entitled"] += (row["healthy"] or 0.0) * fraction
    for moment in sorted(sums):
        bucket = sums[moment]
        # GPUs = GPU-seconds / the bucket's seconds inside [start, now] (first and last may be partial)
        bucket_end = moment + timedelta(seconds=_bucket_seconds(report.days))
        bucket_s = max((min(bucket_end, now) - max(moment, start)).total_seconds(), 1.0)
        report.x.append(moment)
        report.delivered_gpus.append(bucket["delivered"] / bucket_s)
        report.owed_gpus.append(bucket["owed"] / bucket_s)
        report.entitlement_series.append(bucket["entitled"] / bucket_s)
    report.delivered_gpu_h = sum(b["delivered"] for b in sums.values()) / 3600
    report.owed_gpu_h = sum(b["owed"] for b in sums.values()) / 3600
    report.entitled_gpu_h = sum(b["entitled"] for b in sums.values()) / 3600


def _bucket_seconds(days: int) -> float:
    return 3600.0 * (1 if days <= 7 else 6 if days <= 30 else 24)


def _children(
    node: BudgetNode,
    nodes: list[BudgetNode],
    budgets: dict[int, float],
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
) -> list[ChildDelivery]:
    """Each live child with its subtree's delivered and owed GPU-hours, by name."""
    children = sorted((n for n in nodes if n.parent_id == node.pk), key=lambda n: (n.name.lower(), n.pk))
    owner = {}
    for child in children:
        for pk in subtree_ids(nodes, child):
            owner[pk] = child.pk
    totals: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for allocation_id, delivered, owed in (
        AllocationHour.objects.filter(cluster=cluster, allocation_id__in=list(owner), hour__gte=start, hour__lt=end)
        .values("allocation_id").annotate(d=Sum("delivered_gpu_s"), o=Sum("owed_gpu_s"))
        .values_list("allocation_id", "d", "o")
    ):  # fmt: skip
        totals[owner[allocation_id]][0] += (delivered or 0.0) / 3600
        totals[owner[allocation_id]][1] += (owed or 0.0) / 3600
    return [
        ChildDelivery(child, budgets.get(child.pk, 0.0), totals[child.pk][0], totals[child.pk][1])
        for child in children
    ]


def _causes(
    report: Delivery, *, cluster: Cluster, ids: list[int], start: datetime, end: datetime
) -> list[tuple[str, str, float]]:
    weights = dict(
        PendingDay.objects.filter(
            cluster=cluster, allocation_id__in=ids, day__gte=day_floor(start), day__lt=end
        )
        .values("cause")
        .annotate(total=Sum("gpu_s"))
        .values_list("cause", "total")
    )
    parts = attribute_undelivered(undelivered=report.undelivered_gpu_h, weights=weights)
    parts[NO_DEMAND] = max(report.entitled_gpu_h - report.owed_gpu_h, 0.0)
    return [(cause, CAUSE_LABELS[cause], parts.get(cause, 0.0)) for cause in CAUSE_LABELS]
