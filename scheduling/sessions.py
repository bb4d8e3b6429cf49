"""Interactive sessions: when one is idle (squatting), read from the utilisation telemetry.

The pass marks idle sessions (``RunningWorkload.idle``) so that preemption takes them first, and
the renewal of a session's protection is refused to an idle one (``services.renewals``). The same
threshold is the pyramid's "idle but held" list (``portal.dashboards.squatting_workloads``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import Avg, Count

from scheduling.models import ProtectionRenewal, UtilisationSample, Workload

IDLE_BELOW_PCT = 10.0  # mean GPU busy % under which a session is idle
IDLE_WINDOW = timedelta(minutes=30)  # ... over this much of its recent telemetry
RENEWAL_PERIOD = timedelta(hours=24)  # a session renews at most Cluster.session_renewals_per_day in any such


def is_idle(*, busy_pct: float | None, samples: int, started_at: datetime, now: datetime) -> bool:
    """An interactive session is idle when it has run for the whole window, reported telemetry in
    it, and its GPUs were busy under ``IDLE_BELOW_PCT`` on average over the window. No telemetry
    (a backend that reports none) or a session younger than the window: not idle."""
    return (
        samples > 0 and busy_pct is not None and busy_pct < IDLE_BELOW_PCT and now - started_at >= IDLE_WINDOW
    )


def mean_busy(*, workload_ids: Iterable[int], now: datetime) -> dict[int, tuple[float, int]]:
    """workload id -> (mean GPU busy %, samples) over the last ``IDLE_WINDOW``, from one query."""
    ids = list(workload_ids)
    if not ids:
        return {}
    rows = (
        UtilisationSample.objects.filter(workload_id__in=ids, at__gt=now - IDLE_WINDOW, at__lte=now)
        .values("workload_id")
        .annotate(busy=Avg("gpu_utilisation"), samples=Count("id"))
        .values_list("workload_id", "busy", "samples")
    )
    return {workload_id: (float(busy), samples) for workload_id, busy, samples in rows}


def idle_sessions(*, sessions: Iterable[tuple[int, datetime]], now: datetime) -> set[int]:
    """The ids of the idle ones among ``sessions`` ((workload id, run started at), interactive)."""
    started = dict(sessions)
    busy = mean_busy(workload_ids=started, now=now)
    return {
        workload_id
        for workload_id, started_at in started.items()
        if is_idle(
            busy_pct=busy.get(workload_id, (None, 0))[0],
            samples=busy.get(workload_id, (None, 0))[1],
            started_at=started_at,
            now=now,
        )
    }


def renewals_in_period(*, workload_id: int, now: datetime) -> list[datetime]:
    """When the workload renewed its protection in the 24 hours up to ``now``, oldest first."""
    return list(
        ProtectionRenewal.objects.filter(workload_id=workload_id, at__gt=now - RENEWAL_PERIOD, at__lte=now)
        .order_by("at")
        .values_list("at", flat=True)
    )


def renewals_left(*, workload: Workload, now: datetime) -> int:
    """How many more times the workload may renew in the 24 hours up to ``now``."""
    used = len(renewals_in_period(workload_id=workload.pk, now=now))
    return max(workload.cluster.session_renewals_per_day - used, 0)
