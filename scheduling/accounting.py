"""Accounting: GPU-seconds used, delivered and owed, rolled up per (allocation, cluster, hour).

Every pass charges the interval since the last one (``PassLease.accounted_until``) for every run
that overlapped it, so ``AllocationHour.used_gpu_s`` is exact up to the last pass. A run recorded
late (its start lies before the watermark) or closed late (its end lies before the watermark) is
corrected on the spot by :func:`charge_until_watermark`. The sliding-window usage is then a sum of
buckets: whole hours inside the window plus the prorated share of the hour the window starts in.

Owed (DESIGN 2) is the integral of min(entitlement, demand): each pass charges the time since
``PassLease.owed_until`` at the rate seen by that pass (piecewise constant between passes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, Sum

from scheduling.bulk import update_rows
from scheduling.models import AllocationHour, PassLease, Run, UserHour

HOUR = timedelta(hours=1)
Key = tuple[int | None, datetime]  # (allocation id, hour)
UserKey = tuple[int | None, str, datetime]  # (allocation id, user name, hour)


def hour_floor(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def hour_slices(start: datetime, end: datetime) -> Iterator[tuple[datetime, float]]:
    """Split [start, end) into (hour, seconds inside that hour) pieces; nothing when end <= start."""
    cursor = start
    while cursor < end:
        hour = hour_floor(cursor)
        piece_end = min(hour + HOUR, end)
        yield hour, (piece_end - cursor).total_seconds()
        cursor = piece_end


@dataclass
class HourDelta:
    used: float = 0.0
    delivered: float = 0.0
    owed: float = 0.0


@dataclass
class HourDeltas:
    """What one fold adds: per (allocation, hour) to AllocationHour, per (allocation, user, hour) to UserHour."""

    allocations: defaultdict[Key, HourDelta] = field(default_factory=lambda: defaultdict(HourDelta))
    users: defaultdict[UserKey, float] = field(default_factory=lambda: defaultdict(float))


def _add_run_slice(
    deltas: HourDeltas,
    *,
    allocation_id: int | None,
    user_name: str,
    funded: bool,
    gpus: int,
    start: datetime,
    end: datetime,
    sign: float = 1.0,
) -> None:
    for hour, seconds in hour_slices(start, end):
        delta = deltas.allocations[(allocation_id, hour)]
        delta.used += sign * gpus * seconds
        if funded:
            delta.delivered += sign * gpus * seconds
        deltas.users[(allocation_id, user_name, hour)] += sign * gpus * seconds


def apply_hour_deltas(*, cluster_id: int, deltas: HourDeltas) -> None:
    """Add deltas to both hourly tables: per table one read, one bulk update, one bulk create (pass lock held)."""
    _add_to_rows(
        AllocationHour,
        cluster_id=cluster_id,
        key_fields=("allocation_id", "hour"),
        deltas={
            key: {"used_gpu_s": d.used, "delivered_gpu_s": d.delivered, "owed_gpu_s": d.owed}
            for key, d in deltas.allocations.items()
        },
    )
    _add_to_rows(
        UserHour,
        cluster_id=cluster_id,
        key_fields=("allocation_id", "user_name", "hour"),
        deltas={key: {"used_gpu_s": used} for key, used in deltas.users.items()},
    )


def _add_to_rows(
    model: type[AllocationHour | UserHour],
    *,
    cluster_id: int,
    key_fields: tuple[str, ...],
    deltas: dict[tuple, dict[str, float]],
) -> None:
    """Add each delta to the row with its key (allocation id first, hour last), creating missing rows."""
    if not deltas:
        return
    allocations = {key[0] for key in deltas}
    rows = model.objects.filter(cluster_id=cluster_id, hour__in={key[-1] for key in deltas}).filter(
        Q(allocation_id__in=[a for a in allocations if a is not None]) | Q(allocation__isnull=True)
    )
    existing = {tuple(getattr(row, name) for name in key_fields): row for row in rows}
    changed: list[Any] = []  # rows of ``model``
    created: list[Any] = []
    for key, amounts in deltas.items():
        row = existing.get(key) or model(cluster_id=cluster_id, **dict(zip(key_fields, key, strict=True)))
        for name, amount in amounts.items():
            setattr(row, name, getattr(row, name) + amount)
        (changed if row.pk else created).append(row)
    fields = list(next(iter(deltas.values())))
    update_rows(model, changed, fields)
    model.objects.bulk_create(created, batch_size=1000)


def lease_for(cluster_id: int) -> PassLease:
    lease, _ = PassLease.objects.get_or_create(cluster_id=cluster_id)
    return lease


def charge_until_watermark(*, run: Run, since: datetime, sign: float) -> None:
    """Correct the buckets for [since, watermark): +1 for a run opened late, -1 for one closed late."""
    watermark = lease_for(run.cluster_id).accounted_until
    if watermark is None or since >= watermark:
        return
    deltas = HourDeltas()
    _add_run_slice(
        deltas,
        allocation_id=run.allocation_id,
        user_name=run.user_name,
        funded=run.funded,
        gpus=run.gpus,
        start=since,
        end=watermark,
        sign=sign,
    )
    apply_hour_deltas(cluster_id=run.cluster_id, deltas=deltas)


def accounting_charge_usage(*, cluster_id: int, now: datetime) -> int:
    """Charge every run overlapping (accounted_until, now] into the hourly buckets; returns runs charged."""
    lease = lease_for(cluster_id)
    since = lease.accounted_until or now
    deltas = HourDeltas()
    runs = (
        Run.objects.filter(cluster_id=cluster_id, started_at__lt=now)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .values_list("allocation_id", "user_name", "funded", "gpus", "started_at", "ended_at")
    )
    count = 0
    for allocation_id, user_name, funded, gpus, started_at, ended_at in runs:
        end = min(ended_at or now, now)
        _add_run_slice(
            deltas,
            allocation_id=allocation_id,
            user_name=user_name,
            funded=funded,
            gpus=gpus,
            start=max(started_at, since),
            end=end,
        )
        count += 1
    apply_hour_deltas(cluster_id=cluster_id, deltas=deltas)
    PassLease.objects.filter(pk=cluster_id).update(accounted_until=now)
    return count


def accounting_charge_owed(*, cluster_id: int, now: datetime, owed_gpus: dict[int, float]) -> None:
    """Charge owed GPU-seconds since the last pass at this pass's rate min(entitlement, demand)."""
    lease = lease_for(cluster_id)
    since = lease.owed_until or now
    deltas = HourDeltas()
    for allocation_id, rate in owed_gpus.items():
        if rate <= 0:
            continue
        for hour, seconds in hour_slices(since, now):
            deltas.allocations[(allocation_id, hour)].owed += rate * seconds
    apply_hour_deltas(cluster_id=cluster_id, deltas=deltas)
    PassLease.objects.filter(pk=cluster_id).update(owed_until=now)


def usage_in_window(*, cluster_id: int, now: datetime, window: timedelta) -> dict[int | None, float]:
    """GPU-seconds per allocation id in (now - window, now], read from the buckets (exact to the last pass).

    The hour the window starts in is prorated by the share of it inside the window.
    """
    usage = _window_sum(AllocationHour, ("allocation_id",), cluster_id=cluster_id, now=now, window=window)
    return {key[0]: value for key, value in usage.items()}


def user_usage_in_window(
    *, cluster_id: int, now: datetime, window: timedelta
) -> dict[tuple[int | None, str], float]:
    """GPU-seconds per (allocation id, user) in the window, read like :func:`usage_in_window` from the
    ``UserHour`` buckets (exact to the last pass), never from the window's runs."""
    return dict(
        _window_sum(UserHour, ("allocation_id", "user_name"), cluster_id=cluster_id, now=now, window=window)
    )


def _window_sum(
    model: type[AllocationHour | UserHour],
    group: tuple[str, ...],
    *,
    cluster_id: int,
    now: datetime,
    window: timedelta,
) -> defaultdict[tuple, float]:
    """Sum ``used_gpu_s`` per ``group`` over whole hours in the window plus the prorated first hour."""
    start = now - window
    first_hour = hour_floor(start)
    usage: defaultdict[tuple, float] = defaultdict(float)
    whole = model.objects.filter(cluster_id=cluster_id, hour__gt=first_hour, hour__lte=now)
    for *key, used in whole.values(*group).annotate(total=Sum("used_gpu_s")).values_list(*group, "total"):
        usage[tuple(key)] += used or 0.0
    share = 1.0 - (start - first_hour).total_seconds() / HOUR.total_seconds()
    for *key, used in model.objects.filter(cluster_id=cluster_id, hour=first_hour).values_list(
        *group, "used_gpu_s"
    ):
        usage[tuple(key)] += used * share
    return usage


def open_runs_after_watermark(*, cluster_id: int, now: datetime) -> dict[tuple[int | None, str], float]:
    """GPU-seconds of open runs between the last charge and ``now``, per (allocation id, user).

    Added to the buckets to read usage at any moment; empty in a pass, whose reconcile charged up to ``now``.
    """
    watermark = PassLease.objects.filter(pk=cluster_id).values_list("accounted_until", flat=True).first()
    if watermark is None or watermark >= now:
        return {}
    tail: defaultdict[tuple[int | None, str], float] = defaultdict(float)
    runs = Run.objects.filter(cluster_id=cluster_id, ended_at__isnull=True, started_at__lt=now)
    for allocation_id, user_name, gpus, started_at in runs.values_list(
        "allocation_id", "user_name", "gpus", "started_at"
    ):
        tail[(allocation_id, user_name)] += gpus * (now - max(started_at, watermark)).total_seconds()
    return dict(tail)
