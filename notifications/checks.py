"""The conditions nobody records as they happen, checked on a clock (beat) or at the end of a pass.

Each check records events through ``event_record``; its key names the condition *and* its episode
(a day, an hour, the first pass of a streak), so a check that runs every minute tells people once.

- protection ending: funded open runs whose protection ends within N minutes; interactive first.
- under owed: each funded allocation's delivered / owed over the last day under 95%
  (``portal.metrics.meets_budget``, the rule the delivery pages use), once per allocation and day.
- weekly digest: each manager's nodes, delivered / owed over 7 days, once per manager and ISO week.
- availability: healthy / installed GPUs under NOTIFY_AVAILABILITY_BELOW_PCT, once per cluster and hour.
- backend unavailable: called by the pass that found it so; once per streak longer than N minutes.
- passes failing: the last NOTIFY_FAILED_PASSES passes of a cluster failed; once per streak.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, IntegerField, Sum, Value, When

from budgets.models import Allocation, BudgetNode, Membership, Role
from notifications.models import EventKind
from notifications.services import event_record
from portal.metrics import meets_budget, ratio
from scheduling.models import AllocationHour, Cluster, Node, PassStatus, Run, SchedulingPass, WorkloadClass


def warning_minutes(*, interactive: bool, session_warning_min: int) -> int:
    """How long before its protection ends a run's owner is told: an interactive session by its
    cluster's ``session_warning_min`` (it may renew; issue 17), other work by
    NOTIFY_PROTECTION_WARNING_MIN."""
    return session_warning_min if interactive else settings.NOTIFY_PROTECTION_WARNING_MIN


def protection_ending_check(*, now: datetime) -> int:
    """Open funded runs whose protection ends in (now, now + N min] (``warning_minutes``);
    interactive sessions first. Once per end of protection: a renewed session is told again
    before its new end."""
    widest = max(
        [
            settings.NOTIFY_PROTECTION_WARNING_MIN,
            *Cluster.objects.values_list("session_warning_min", flat=True),
        ]
    )
    first = Case(When(workload__workload_class=WorkloadClass.INTERACTIVE, then=Value(0)), default=Value(1),
                 output_field=IntegerField())  # fmt: skip
    runs = (
        Run.objects.filter(ended_at__isnull=True, funded=True, protected_until__gt=now,
                           protected_until__lte=now + timedelta(minutes=widest))
        .annotate(first=first).order_by("first", "protected_until", "id")
        .values_list("workload_id", "attempt", "cluster_id", "protected_until", "first", "cluster__session_warning_min")
    )  # fmt: skip
    count = 0
    with transaction.atomic():
        for workload_id, attempt, cluster_id, until, first_, session_min in runs:
            if until - now > timedelta(
                minutes=warning_minutes(interactive=first_ == 0, session_warning_min=session_min)
            ):
                continue
            left = max(round((until - now).total_seconds() / 60), 1)
            key = f"protection_ending:{workload_id}:{attempt}:{int(until.timestamp())}"
            event_record(kind=EventKind.PROTECTION_ENDING, key=key, now=now, cluster_id=cluster_id, workload_id=workload_id,
                         params={"minutes": left, "protected_until": until.strftime("%H:%M UTC")})  # fmt: skip
            count += 1
    return count


def allocation_delivery(
    *, cluster: Cluster, since: datetime, until: datetime
) -> dict[int, tuple[float, float]]:
    """allocation id -> (delivered, owed) GPU-hours in [since, until), from the hourly rollups."""
    rows = (
        AllocationHour.objects.filter(cluster=cluster, allocation__isnull=False, hour__gte=since, hour__lt=until)
        .values("allocation_id").annotate(d=Sum("delivered_gpu_s"), o=Sum("owed_gpu_s"))
        .values_list("allocation_id", "d", "o")
    )  # fmt: skip
    return {pk: ((d or 0.0) / 3600, (o or 0.0) / 3600) for pk, d, o in rows}


def under_owed_check(*, now: datetime) -> int:
    """Funded allocations under 95% of owed over the last 24 hours, once per allocation and day."""
    count = 0
    day = now.date().isoformat()
    with transaction.atomic():
        for cluster in Cluster.objects.order_by("id"):
            funded = set(
                Allocation.objects.filter(cluster=cluster, gpus__gt=0).values_list("node_id", flat=True)
            )
            delivery = allocation_delivery(cluster=cluster, since=now - timedelta(days=1), until=now)
            for node_id in sorted(funded & delivery.keys()):
                delivered, owed = delivery[node_id]
                if owed <= 0 or meets_budget(delivered, owed):
                    continue
                event_record(kind=EventKind.UNDER_OWED, key=f"under_owed:{cluster.pk}:{node_id}:{day}", now=now,
                             cluster_id=cluster.pk, node_id=node_id,
                             params={"delivered_gpu_h": delivered, "owed_gpu_h": owed, "ratio": ratio(delivered, owed)})  # fmt: skip
                count += 1
    return count


def weekly_digest(*, now: datetime) -> int:
    """One digest per manager: delivered / owed of each node they manage, per cluster, last 7 days."""
    managed: dict[int, list[BudgetNode]] = defaultdict(list)
    for membership in Membership.objects.filter(role=Role.MANAGER, user__is_active=True).select_related(
        "node"
    ):
        managed[membership.user_id].append(membership.node)
    clusters = list(Cluster.objects.order_by("id"))
    totals = {
        c.pk: allocation_delivery(cluster=c, since=now - timedelta(days=7), until=now) for c in clusters
    }
    paths = dict(BudgetNode.objects.values_list("id", "path"))
    year, week_number, _ = now.isocalendar()
    week = f"{year}-W{week_number:02d}"
    with transaction.atomic():
        for user_id in sorted(managed):
            rows = []
            for node in sorted(managed[user_id], key=lambda n: n.path):
                for cluster in clusters:
                    inside = [
                        pk
                        for pk in totals[cluster.pk]
                        if paths[pk] == node.path or paths[pk].startswith(node.path + "/")
                    ]
                    delivered = sum(totals[cluster.pk][pk][0] for pk in inside)
                    owed = sum(totals[cluster.pk][pk][1] for pk in inside)
                    if owed > 0:
                        rows.append({"path": node.path, "cluster": cluster.name, "delivered_gpu_h": delivered,
                                     "owed_gpu_h": owed, "ratio": ratio(delivered, owed)})  # fmt: skip
            event_record(kind=EventKind.WEEKLY_DIGEST, key=f"weekly_digest:{user_id}:{week}", now=now,
                         user_id=user_id, params={"rows": rows})  # fmt: skip
    return len(managed)


def availability_check(*, now: datetime) -> int:
    """Clusters whose healthy GPUs are under the threshold now; once per cluster and hour."""
    threshold = settings.NOTIFY_AVAILABILITY_BELOW_PCT
    count = 0
    hour = now.strftime("%Y-%m-%dT%H")
    with transaction.atomic():
        for cluster in Cluster.objects.order_by("id"):
            installed = sum(Node.objects.filter(cluster=cluster).values_list("gpus", flat=True))
            healthy = sum(Node.objects.filter(cluster=cluster, healthy=True).values_list("gpus", flat=True))
            availability = ratio(healthy, installed)
            if availability is None or availability * 100 >= threshold:
                continue
            event_record(kind=EventKind.AVAILABILITY_LOW, key=f"availability_low:{cluster.pk}:{hour}", now=now,
                         cluster_id=cluster.pk, params={"availability": availability, "healthy": healthy,
                                                        "installed": installed, "threshold_pct": threshold})  # fmt: skip
            count += 1
    return count


def backend_unavailable_check(*, cluster: Cluster, now: datetime, error: str) -> bool:
    """Called by a pass that found the backend unavailable: an event once the streak is N minutes old."""
    last_good = (
        SchedulingPass.objects.filter(cluster=cluster).exclude(status__in=[PassStatus.BACKEND_UNAVAILABLE, PassStatus.RUNNING])
        .order_by("-started_at", "-id").values_list("started_at", flat=True).first()
    )  # fmt: skip
    streak = SchedulingPass.objects.filter(cluster=cluster, status=PassStatus.BACKEND_UNAVAILABLE)
    if last_good is not None:
        streak = streak.filter(started_at__gt=last_good)
    first = streak.order_by("started_at", "id").values_list("id", "started_at").first()
    if first is None or now - first[1] < timedelta(minutes=settings.NOTIFY_BACKEND_DOWN_MIN):
        return False
    minutes = int((now - first[1]).total_seconds() // 60)
    event_record(kind=EventKind.BACKEND_UNAVAILABLE, key=f"backend_unavailable:{cluster.pk}:{first[0]}", now=now,
                 cluster_id=cluster.pk, params={"minutes": minutes, "since": first[1].strftime("%H:%M UTC"), "error": error[:500]})  # fmt: skip
    return True


def passes_failing_check(*, now: datetime) -> int:
    """Clusters whose last NOTIFY_FAILED_PASSES passes all failed; once per streak (its first pass)."""
    needed = settings.NOTIFY_FAILED_PASSES
    count = 0
    with transaction.atomic():
        for cluster in Cluster.objects.order_by("id"):
            last = list(
                SchedulingPass.objects.filter(cluster=cluster).exclude(status=PassStatus.RUNNING)
                .order_by("-started_at", "-id").values_list("id", "status", "error")[:needed]
            )  # fmt: skip
            if len(last) < needed or any(status != PassStatus.FAILED for _, status, _ in last):
                continue
            first_of_streak = _streak_start(cluster, last[-1][0])
            event_record(kind=EventKind.PASSES_FAILING, key=f"passes_failing:{cluster.pk}:{first_of_streak}", now=now,
                         cluster_id=cluster.pk, params={"count": needed, "error": last[0][2][:500]})  # fmt: skip
            count += 1
    return count


def _streak_start(cluster: Cluster, oldest_seen: int) -> int:
    """The id of the first failed pass after the last pass that did not fail."""
    last_ok = (
        SchedulingPass.objects.filter(cluster=cluster, id__lt=oldest_seen).exclude(status=PassStatus.FAILED)
        .order_by("-id").values_list("id", flat=True).first()
    )  # fmt: skip
    streak = SchedulingPass.objects.filter(cluster=cluster, status=PassStatus.FAILED, id__gt=last_ok or 0)
    return streak.order_by("id").values_list("id", flat=True).first() or oldest_seen
