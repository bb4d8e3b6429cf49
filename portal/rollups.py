"""Fold new history into the hourly rollups of :mod:`portal.models` (incremental, never a rescan).

Each call samples the cluster once: it charges the time since the last sample at the current
health and pending causes, then folds the runs, passes and telemetry samples recorded since the
watermarks (by id, so a run recorded late is still counted once). It is cheap enough to call after
every scheduling pass (``scheduling.passes`` calls it on commit); calls closer than
``MIN_INTERVAL`` to the last sample only fold events.
Gaps longer than ``MAX_GAP`` (the scheduler was down) are charged as ``MAX_GAP``, not extrapolated.
A cluster's first fold starts at the current hour (see :func:`_start_watermarks`).
"""

from __future__ import annotations

import bisect
import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Max, OuterRef, Q, QuerySet, Subquery, Sum

from portal.models import (
    WAIT_BIN_FIELDS,
    WAIT_EDGES_S,
    ClusterHour,
    PendingCause,
    PendingDay,
    ReasonChange,
    RollupWatermark,
    WaitHour,
)
from scheduling.accounting import hour_floor, hour_slices
from scheduling.models import (
    EndReason,
    Node,
    PendingReason,
    Run,
    SchedulingPass,
    UtilisationSample,
    WorkloadState,
)

logger = logging.getLogger(__name__)
MIN_INTERVAL = timedelta(seconds=30)
MAX_GAP = timedelta(minutes=15)

# Pending reason code -> the cause undelivered owed time is attributed to (DESIGN 6 codes).
CAUSE_OF_CODE: dict[str, str] = {
    "FAIR_SHARE_QUEUED": PendingCause.WAITING,
    "WAITING_FOR_GPUS": PendingCause.WAITING,
    "PROTECTED_WORK": PendingCause.WAITING,
    "FRAGMENTED": PendingCause.FRAGMENTATION,
    "RESERVED_FOR_LARGER_JOB": PendingCause.FRAGMENTATION,
    "NO_MATCHING_NODES": PendingCause.UNHEALTHY,
    "BACKEND_UNAVAILABLE": PendingCause.UNHEALTHY,
}


def day_floor(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def wait_bin(wait_s: float) -> int:
    """Index of the histogram bin of WAIT_EDGES_S holding ``wait_s`` (negative waits count as 0)."""
    return max(bisect.bisect_right(WAIT_EDGES_S, max(wait_s, 0.0)) - 1, 0)


def rollups_fold(*, cluster_id: int, now: datetime) -> None:
    """Sample the cluster and fold new events into the rollups, in one transaction."""
    with transaction.atomic():
        mark, created = RollupWatermark.objects.select_for_update().get_or_create(cluster_id=cluster_id)
        if created:
            _start_watermarks(mark, now)
        hours: dict[datetime, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        if mark.sampled_at is None or now - mark.sampled_at >= MIN_INTERVAL:
            since = max(mark.sampled_at or now, now - MAX_GAP)
            _sample_health(cluster_id, since, now, hours)
            _sample_pending(cluster_id, since, now)
            _record_reason_changes(cluster_id, now)
            mark.sampled_at = now
        mark.last_run_id = _fold_runs(cluster_id, mark.last_run_id)
        _fold_preemptions(cluster_id, mark.preempted_until or now, now, hours)
        mark.preempted_until = now
        mark.last_pass_id = _fold_passes(cluster_id, mark.last_pass_id, hours)
        mark.last_utilisation_id = _fold_utilisation(cluster_id, mark.last_utilisation_id, hours)
        _add_cluster_hours(cluster_id, hours)
        mark.save()


def _start_watermarks(mark: RollupWatermark, now: datetime) -> None:
    """A cluster's first fold starts at the current hour: history recorded before the rollups existed
    is not folded (its health was never sampled), and a large database is not rescanned in a pass."""
    hour = hour_floor(now)
    cluster_id = mark.cluster_id
    mark.last_run_id = _max_id(Run.objects.filter(cluster_id=cluster_id, started_at__lt=hour))
    mark.last_pass_id = _max_id(SchedulingPass.objects.filter(cluster_id=cluster_id, started_at__lt=hour))
    mark.last_utilisation_id = _max_id(UtilisationSample.objects.filter(cluster_id=cluster_id, at__lt=hour))


def _max_id(queryset: QuerySet) -> int:
    return queryset.aggregate(last=Max("pk"))["last"] or 0


def _sample_health(cluster_id: int, since: datetime, now: datetime, hours: dict) -> None:
    totals = Node.objects.filter(cluster_id=cluster_id).aggregate(
        installed_gpus=Sum("gpus", default=0), healthy_gpus=Sum("gpus", filter=Q(healthy=True), default=0)
    )
    for hour, seconds in hour_slices(since, now):
        hours[hour]["installed_gpu_s"] += totals["installed_gpus"] * seconds
        hours[hour]["healthy_gpu_s"] += totals["healthy_gpus"] * seconds


def _sample_pending(cluster_id: int, since: datetime, now: datetime) -> None:
    """Charge each funded allocation's pending GPUs to the cause of their pending reason."""
    rows = (
        PendingReason.objects.filter(workload__cluster_id=cluster_id, workload__state=WorkloadState.PENDING)
        .exclude(workload__allocation__isnull=True)
        .values_list("workload__allocation_id", "code")
        .annotate(gpus=Sum("workload__gpus"))
    )
    rates: dict[tuple[int, str], float] = defaultdict(float)
    for allocation_id, code, gpus in rows:
        rates[(allocation_id, CAUSE_OF_CODE.get(code, PendingCause.OTHER))] += gpus or 0
    deltas: dict[tuple[int, datetime, str], float] = defaultdict(float)
    for (allocation_id, cause), gpus in rates.items():
        for hour, seconds in hour_slices(since, now):
            deltas[(allocation_id, day_floor(hour), cause)] += gpus * seconds
    _add_pending_days(cluster_id, deltas)


def _record_reason_changes(cluster_id: int, now: datetime) -> None:
    """One row per pending workload whose reason code differs from the last one recorded for it."""
    last_code = (
        ReasonChange.objects.filter(workload_id=OuterRef("workload_id"))
        .order_by("-at", "-id")
        .values("code")[:1]
    )
    rows = (
        PendingReason.objects.filter(workload__cluster_id=cluster_id, workload__state=WorkloadState.PENDING)
        .annotate(last_code=Subquery(last_code))
        .filter(Q(last_code__isnull=True) | ~Q(last_code=F("code")))  # a NULL never compares unequal
        .values_list("workload_id", "code", "message")
    )
    ReasonChange.objects.bulk_create(
        [ReasonChange(workload_id=w, at=now, code=code, message=message) for w, code, message in rows],
        batch_size=1000,
    )


def _fold_runs(cluster_id: int, last_id: int) -> int:
    """Waits of the runs recorded since ``last_id``."""
    runs = list(
        Run.objects.filter(cluster_id=cluster_id, pk__gt=last_id)
        .order_by("pk")
        .values_list("pk", "started_at", "wait_s", "workload__workload_class")
    )
    waits: dict[tuple[str, datetime], list[float]] = defaultdict(list)
    for _, started_at, wait_s, workload_class in runs:
        waits[(workload_class, hour_floor(started_at))].append(wait_s)
    _add_wait_hours(cluster_id, waits)
    return runs[-1][0] if runs else last_id


def _fold_preemptions(cluster_id: int, since: datetime, now: datetime, hours: dict) -> None:
    """Runs that ended preempted in (since, now]: a count, requeues, and the work lost.

    Non-resumable preempted work loses its whole run; resumable work loses at most its last
    checkpoint, which the backend does not report, so it is counted as a requeue, not as loss.
    """
    ended = Run.objects.filter(
        cluster_id=cluster_id, ended_at__gt=since, ended_at__lte=now, end_reason=EndReason.PREEMPTED
    ).values_list("ended_at", "started_at", "gpus", "workload__resumable", "allocation_id", "funded")
    lost: dict[tuple[int, datetime, str], float] = defaultdict(float)
    for ended_at, started_at, gpus, resumable, allocation_id, funded in ended:
        hour = hour_floor(ended_at)  # type: ignore[arg-type]  # filtered on ended_at__gt: never null
        hours[hour]["preemptions"] += 1
        if resumable:
            hours[hour]["requeues"] += 1
            continue
        gpu_s = gpus * (ended_at - started_at).total_seconds()  # type: ignore[operator]  # never null, as above
        hours[hour]["lost_gpu_s"] += gpu_s
        if allocation_id is not None and funded:
            lost[(allocation_id, day_floor(hour), PendingCause.PREEMPTION)] += gpu_s
    _add_pending_days(cluster_id, lost)


def _fold_passes(cluster_id: int, last_id: int, hours: dict) -> int:
    passes = list(
        SchedulingPass.objects.filter(cluster_id=cluster_id, pk__gt=last_id, finished_at__isnull=False)
        .order_by("pk")
        .values_list("pk", "started_at", "total_ms")
    )
    for _, started_at, total_ms in passes:
        bucket = hours[hour_floor(started_at)]
        bucket["pass_count"] += 1
        bucket["pass_total_ms"] += total_ms
        bucket["pass_max_ms"] = max(bucket.get("pass_max_ms", 0.0), total_ms)
    return passes[-1][0] if passes else last_id


def _fold_utilisation(cluster_id: int, last_id: int, hours: dict) -> int:
    samples = list(
        UtilisationSample.objects.filter(cluster_id=cluster_id, pk__gt=last_id)
        .order_by("pk")
        .values_list("pk", "at", "gpus", "gpu_utilisation")
    )
    for _, at, gpus, utilisation in samples:
        bucket = hours[hour_floor(at)]
        bucket["busy_gpus"] += gpus * utilisation / 100.0
        bucket["sampled_gpus"] += gpus
    return samples[-1][0] if samples else last_id


_ADDITIVE = ("installed_gpu_s", "healthy_gpu_s", "busy_gpus", "sampled_gpus", "preemptions", "requeues",
             "lost_gpu_s", "pass_count", "pass_total_ms")  # fmt: skip


def _add_cluster_hours(cluster_id: int, hours: dict[datetime, dict[str, float]]) -> None:
    if not hours:
        return
    existing = {
        row.hour: row for row in ClusterHour.objects.filter(cluster_id=cluster_id, hour__in=list(hours))
    }
    changed: list[ClusterHour] = []
    created: list[ClusterHour] = []
    for hour, delta in hours.items():
        row = existing.get(hour) or ClusterHour(cluster_id=cluster_id, hour=hour)
        for name in _ADDITIVE:
            setattr(row, name, getattr(row, name) + type(getattr(row, name))(delta.get(name, 0)))
        row.pass_max_ms = max(row.pass_max_ms, delta.get("pass_max_ms", 0.0))
        (changed if row.pk else created).append(row)
    ClusterHour.objects.bulk_update(changed, [*_ADDITIVE, "pass_max_ms"], batch_size=500)
    ClusterHour.objects.bulk_create(created, batch_size=500)


def _add_wait_hours(cluster_id: int, waits: dict[tuple[str, datetime], list[float]]) -> None:
    if not waits:
        return
    existing = {
        (row.workload_class, row.hour): row
        for row in WaitHour.objects.filter(cluster_id=cluster_id, hour__in={hour for _, hour in waits})
    }
    changed: list[WaitHour] = []
    created: list[WaitHour] = []
    for (workload_class, hour), values in waits.items():
        row = existing.get((workload_class, hour)) or WaitHour(
            cluster_id=cluster_id, workload_class=workload_class, hour=hour
        )
        for wait_s in values:
            row.add_wait(wait_s, wait_bin(wait_s))
        (changed if row.pk else created).append(row)
    WaitHour.objects.bulk_update(changed, ["count", "total_wait_s", *WAIT_BIN_FIELDS], batch_size=500)
    WaitHour.objects.bulk_create(created, batch_size=500)


def _add_pending_days(cluster_id: int, deltas: dict[tuple[int, datetime, str], float]) -> None:
    if not deltas:
        return
    existing = {
        (row.allocation_id, row.day, row.cause): row
        for row in PendingDay.objects.filter(cluster_id=cluster_id, day__in={day for _, day, _ in deltas})
    }
    changed: list[PendingDay] = []
    created: list[PendingDay] = []
    for (allocation_id, day, cause), gpu_s in deltas.items():
        row = existing.get((allocation_id, day, cause)) or PendingDay(
            cluster_id=cluster_id, allocation_id=allocation_id, day=day, cause=cause
        )
        row.gpu_s += gpu_s
        (changed if row.pk else created).append(row)
    PendingDay.objects.bulk_update(changed, ["gpu_s"], batch_size=500)
    PendingDay.objects.bulk_create(created, batch_size=500)
