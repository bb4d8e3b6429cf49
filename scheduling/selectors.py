"""Reads for the live scheduler: workloads with their reasons, waits, and the access-checked getter."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from budgets.access import memberships_by_path, role_on
from budgets.models import Role
from scheduling.models import AllocationHour, Cluster, Run, SchedulingPass, Workload

LIST_FILTERS = {
    "cluster": "cluster__slug",
    "allocation": "allocation__path",
    "user": "user_name",
    "state": "state",
    "class": "workload_class",
    "workload_class": "workload_class",
}


def workload_list(*, filters: Mapping[str, str] | None = None) -> QuerySet[Workload]:
    """Workloads with everything a list row shows joined in (one query, whatever the page size).

    ``filters`` keys: cluster (slug), allocation (path), user (name), state, class.
    Every signed-in user may read the queue: like budgets, it is public inside the lab.
    """
    queryset = Workload.objects.select_related("cluster", "allocation", "pending_reason")
    for key, value in (filters or {}).items():
        if key in LIST_FILTERS and value:
            queryset = queryset.filter(**{LIST_FILTERS[key]: value})
    return queryset.order_by("-submitted_at", "-id")


def may_act_on(
    user: User | AnonymousUser, workload: Workload, *, memberships: dict[str, str] | None = None
) -> bool:
    """Cancel / hold / release: the owner (:func:`_owns`), a manager of its allocation (or above), staff.

    ``memberships`` (``budgets.access.memberships_by_path``): read once for a list of workloads."""
    if not user.is_authenticated:
        return False
    if user.is_staff or _owns(user, workload):
        return True
    if workload.allocation is None:
        return False
    return role_on(user, workload.allocation, memberships=memberships) == Role.MANAGER


def _owns(user: User, workload: Workload) -> bool:
    """The owner; work recorded without one (adopted from the backend, demo history) is its user's by name."""
    if workload.owner_id is not None:
        return workload.owner_id == user.pk
    return bool(workload.user_name) and workload.user_name == user.get_username()


def workloads_may_act_on(user: User | AnonymousUser, workloads: list[Workload]) -> set[int]:
    """Ids of the ``workloads`` the user may cancel, hold or release (one query, however many)."""
    memberships = memberships_by_path(user)
    return {w.pk for w in workloads if may_act_on(user, w, memberships=memberships)}


def workload_get_for_user(*, user: User | AnonymousUser, workload_id: object, act: bool = False) -> Workload:
    """The one access-checked getter: 404 when it does not exist, PermissionDenied to act without right."""
    try:
        workload = workload_list().get(pk=int(str(workload_id)))
    except (Workload.DoesNotExist, ValueError):
        raise Http404("No such workload.") from None
    if act and not may_act_on(user, workload):
        raise PermissionDenied("Only the owner, a manager of its allocation or on-call staff may do that.")
    return workload


def workload_runs(*, workload: Workload) -> QuerySet[Run]:
    return workload.runs.order_by("attempt")


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (fraction in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def wait_times(*, cluster: Cluster, since: datetime) -> dict[str, dict[str, float | int | None]]:
    """Wait p50 / p90 in seconds per workload class for runs started since ``since``.

    First attempts measure submit -> first start; later attempts requeue -> restart (``restart_*``).
    """
    by_class: dict[str, dict[str, list[float]]] = {}
    rows = Run.objects.filter(cluster=cluster, started_at__gte=since).values_list(
        "workload__workload_class", "attempt", "wait_s"
    )
    for workload_class, attempt, wait_s in rows:
        kind = "first" if attempt == 1 else "restart"
        by_class.setdefault(workload_class, {"first": [], "restart": []})[kind].append(wait_s)
    return {
        workload_class: {
            "count": len(waits["first"]),
            "p50_s": percentile(waits["first"], 0.5),
            "p90_s": percentile(waits["first"], 0.9),
            "restart_count": len(waits["restart"]),
            "restart_p50_s": percentile(waits["restart"], 0.5),
            "restart_p90_s": percentile(waits["restart"], 0.9),
        }
        for workload_class, waits in sorted(by_class.items())
    }


def allocation_hours(*, cluster: Cluster, since: datetime) -> QuerySet[AllocationHour]:
    """Hourly used / delivered / owed GPU-seconds per allocation on a cluster since a time."""
    return AllocationHour.objects.filter(cluster=cluster, hour__gte=since).select_related("allocation")


def latest_pass(*, cluster: Cluster) -> SchedulingPass | None:
    return SchedulingPass.objects.filter(cluster=cluster).order_by("-started_at", "-id").first()
