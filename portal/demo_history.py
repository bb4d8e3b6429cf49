"""Weeks of plausible history for the pages, written straight into the rollups (and a live queue).

The live scheduler builds this history as it runs; a fresh demo or a test has none, so the pages
would be empty. ``history_seed`` fills, for one cluster: hourly ``AllocationHour`` (owed around
each leaf's entitlement, delivered mostly near it), ``ClusterHour`` (a few node outages, telemetry,
passes), ``WaitHour`` per class, ``PendingDay`` causes; and a queue: running workloads with open
runs and telemetry (one idle: squatting), pending workloads with pending reasons in scheduling order,
finished workloads with their runs, and recent passes. Deterministic for a given ``seed``.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.contrib.auth.models import AnonymousUser
from django.db import transaction

from budgets.models import BudgetNode
from budgets.selectors import budget_tree
from portal.models import (
    WAIT_BIN_FIELDS,
    WAIT_EDGES_S,
    ClusterHour,
    PendingCause,
    PendingDay,
    RollupWatermark,
    WaitHour,
)
from portal.rollups import day_floor, wait_bin
from scheduling.accounting import HOUR, hour_floor
from scheduling.models import (
    AllocationHour,
    Cluster,
    EndReason,
    Node,
    PendingReason,
    Run,
    SchedulingPass,
    UtilisationSample,
    Workload,
    WorkloadState,
)
from scheduling.policy.reasons import fair_share_queued, gpus_phrase

CLASSES = {"debug": (30, 300), "interactive": (60, 1200), "batch": (300, 7200)}  # median, spread of waits (s)


def history_seed(
    *, cluster: Cluster, now: datetime, days: int = 30, seed: int = 6, users: list[str] | None = None
) -> None:
    """Fill the rollups for the last ``days`` and, on a cluster without workloads, a live queue.

    On a cluster the scheduler already runs, only the hours before its first recorded rollup are
    filled (a backfill), and its queue and watermarks are left alone.
    """
    rng = random.Random(seed)
    leaves = _funded_leaves(cluster)
    live_since = _first_live_hour(cluster)
    hours = [
        h
        for h in (hour_floor(now) - HOUR * i for i in range(days * 24, -1, -1))
        if live_since is None or h < live_since
    ]
    with transaction.atomic():
        _allocation_hours(cluster, leaves, hours, now, rng)
        _cluster_hours(cluster, hours, now, rng)
        _wait_hours(cluster, hours, rng)
        _pending_days(
            cluster,
            leaves,
            [h for h in hours if live_since is None or day_floor(h) < day_floor(live_since)],
            rng,
        )
        if live_since is None and not Workload.objects.filter(cluster=cluster).exists():
            _queue(cluster, leaves, now, rng, users or ["researcher"])
            RollupWatermark.objects.update_or_create(
                cluster=cluster,
                defaults={"sampled_at": now, "preempted_until": now, "last_run_id": _max_id(Run),
                          "last_pass_id": _max_id(SchedulingPass), "last_utilisation_id": _max_id(UtilisationSample)},
            )  # fmt: skip


def _first_live_hour(cluster: Cluster) -> datetime | None:
    """The earliest hour the live scheduler (or an earlier seed) already wrote a rollup for."""
    firsts = [
        AllocationHour.objects.filter(cluster=cluster)
        .order_by("hour")
        .values_list("hour", flat=True)
        .first(),
        ClusterHour.objects.filter(cluster=cluster).order_by("hour").values_list("hour", flat=True).first(),
    ]
    known = [first for first in firsts if first is not None]
    return min(known) if known else None


def _max_id(model: type[Run] | type[SchedulingPass] | type[UtilisationSample]) -> int:
    last = model.objects.order_by("-pk").values_list("pk", flat=True).first()
    return last or 0


def _funded_leaves(cluster: Cluster) -> list[tuple[BudgetNode, float]]:
    """(node, entitlement GPUs) of funded nodes without funded children."""
    rows = budget_tree(cluster=cluster, user=AnonymousUser()).rows
    funded_parents = {row.node.parent_id for row in rows if row.gpus > 0}
    return [
        (row.node, float(row.entitlement))
        for row in rows
        if row.gpus > 0 and row.node.pk not in funded_parents
    ]


def _fraction(hour: datetime, now: datetime) -> float:
    """The share of ``hour`` already past (the current hour is partial)."""
    return min(max((now - hour).total_seconds() / 3600.0, 0.0), 1.0)


def _allocation_hours(
    cluster: Cluster, leaves: list, hours: list[datetime], now: datetime, rng: random.Random
) -> None:
    rows = []
    for index, (node, entitlement) in enumerate(leaves):
        appetite = 0.85 + 0.15 * rng.random()  # how much of its entitlement this team wants
        served = (
            0.80 + 0.22 * rng.random() if index % 5 else 0.7 + 0.1 * rng.random()
        )  # every 5th under-served
        for hour in hours:
            seconds = 3600.0 * _fraction(hour, now)
            owed = entitlement * min(1.0, appetite * (0.85 + 0.3 * rng.random())) * seconds
            delivered = owed * min(served + 0.1 * rng.random(), 1.15)
            rows.append(AllocationHour(cluster=cluster, allocation=node, hour=hour, owed_gpu_s=owed,
                                       delivered_gpu_s=delivered, used_gpu_s=delivered * 1.02))  # fmt: skip
    for hour in hours:  # unfunded work soaking up idle capacity
        used = (0.08 + 0.08 * rng.random()) * _installed(cluster) * 3600.0 * _fraction(hour, now)
        rows.append(AllocationHour(cluster=cluster, allocation=None, hour=hour, used_gpu_s=used))
    AllocationHour.objects.bulk_create(rows, batch_size=2000)


def _installed(cluster: Cluster) -> int:
    return sum(Node.objects.filter(cluster=cluster).values_list("gpus", flat=True))


def _cluster_hours(cluster: Cluster, hours: list[datetime], now: datetime, rng: random.Random) -> None:
    installed = _installed(cluster)
    rows = []
    for hour in hours:
        seconds = 3600.0 * _fraction(hour, now)
        outage = 0.04 * rng.random() if rng.random() < 0.15 else 0.005 * rng.random()
        passes = int(seconds / 10)
        rows.append(ClusterHour(
            cluster=cluster, hour=hour, installed_gpu_s=installed * seconds, healthy_gpu_s=installed * seconds * (1 - outage),
            busy_gpus=0.0, sampled_gpus=0.0, preemptions=rng.randint(0, 6), requeues=0, lost_gpu_s=0.0,
            pass_count=passes, pass_total_ms=passes * (40 + 30 * rng.random()), pass_max_ms=120 + 200 * rng.random(),
        ))  # fmt: skip
        row = rows[-1]
        row.requeues = rng.randint(0, row.preemptions)
        row.lost_gpu_s = (row.preemptions - row.requeues) * 8 * 1800 * rng.random()
        row.sampled_gpus = installed * 6 * _fraction(hour, now)
        row.busy_gpus = row.sampled_gpus * (0.72 + 0.2 * rng.random())
    ClusterHour.objects.bulk_create(rows, batch_size=2000)


def _wait_hours(cluster: Cluster, hours: list[datetime], rng: random.Random) -> None:
    rows = []
    for hour in hours:
        for workload_class, (median, spread) in CLASSES.items():
            histogram = [0] * len(WAIT_EDGES_S)
            count = rng.randint(2, 12)
            waits = [rng.lognormvariate(0, 1.0) * median + rng.random() * spread * 0.1 for _ in range(count)]
            for wait_s in waits:
                histogram[wait_bin(wait_s)] += 1
            rows.append(WaitHour(cluster=cluster, workload_class=workload_class, hour=hour, count=count,
                                 total_wait_s=sum(waits), **dict(zip(WAIT_BIN_FIELDS, histogram, strict=True))))  # fmt: skip
    WaitHour.objects.bulk_create(rows, batch_size=2000)


def _pending_days(cluster: Cluster, leaves: list, hours: list[datetime], rng: random.Random) -> None:
    causes = [
        PendingCause.WAITING,
        PendingCause.FRAGMENTATION,
        PendingCause.PREEMPTION,
        PendingCause.UNHEALTHY,
    ]
    weights = [0.6, 0.2, 0.12, 0.08]
    days = sorted({day_floor(hour) for hour in hours})
    rows = [
        PendingDay(
            cluster=cluster, allocation=node, day=day, cause=cause, gpu_s=weight * 86400 * 2 * rng.random()
        )
        for node, _ in leaves
        for day in days
        for cause, weight in zip(causes, weights, strict=True)
    ]
    PendingDay.objects.bulk_create(rows, batch_size=2000)


def _queue(cluster: Cluster, leaves: list, now: datetime, rng: random.Random, users: list[str]) -> None:
    """Running, pending and finished workloads; the first user's are at known places."""
    nodes = list(Node.objects.filter(cluster=cluster, healthy=True).order_by("name"))
    per_node = nodes[0].gpus if nodes else 8
    pending = []
    for index in range(24):
        node, _ = leaves[index % len(leaves)]
        user = users[index % len(users)] if index < 6 else f"user{index:02d}"
        gpus = [1, 2, 4, per_node, 2 * per_node][index % 5]
        workload = _workload(cluster, node, user, gpus, now - timedelta(minutes=15 + 7 * index), index)
        pending.append(workload)
        PendingReason.objects.create(
            workload=workload, updated_at=now, position=index + 1, **_reason(index, node, gpus, now)
        )
    free = {machine.name: machine.gpus for machine in nodes}
    for index in range(12):
        node, _ = leaves[(index * 3) % len(leaves)]
        user = users[index % len(users)] if index < 3 else f"user{index + 40:02d}"
        gpus = [1, 2, 4, 8][index % 4]
        machine = next((m for m in nodes if free[m.name] >= gpus), None)
        if machine is not None:
            free[machine.name] -= gpus
            _running(cluster, node, user, machine, gpus, now, index, rng)
    _fill_cluster(cluster, leaves, [m for m in nodes if free[m.name] == m.gpus], now)
    for index in range(8):
        node, _ = leaves[(index * 5) % len(leaves)]
        _finished(cluster, node, users[0] if index < 2 else f"user{index + 60:02d}", now, index)
    for index in range(10):
        started = now - timedelta(seconds=10 * (index + 1))
        SchedulingPass.objects.create(cluster=cluster, started_at=started, finished_at=started + timedelta(milliseconds=60),
                                      status="completed", total_ms=40 + 5 * index, pending_count=len(pending))  # fmt: skip


def _fill_cluster(cluster: Cluster, leaves: list, machines: list[Node], now: datetime) -> None:
    """Whole-node runs on all but the last two free nodes, so the queue waits for a reason; every
    sixth is unfunded work soaking up capacity nobody funded wants now."""
    for index, machine in enumerate(machines[:-2]):
        node, _ = leaves[index % len(leaves)]
        funded = index % 6 != 5
        started = now - timedelta(minutes=20 + 13 * (index % 40))
        user = f"user{index % 50 + 100:03d}"
        workload = _workload(cluster, node if funded else None, user, machine.gpus, started, index,
                             state=WorkloadState.RUNNING, first_started_at=started, attempt=1)  # fmt: skip
        Run.objects.create(workload=workload, cluster=cluster, allocation=workload.allocation, user_name=user, attempt=1,
                           gpus=machine.gpus, placement=[[machine.name, machine.gpus]], started_at=started, funded=funded,
                           protected_until=started + timedelta(hours=4 if funded else 0), wait_s=600.0)  # fmt: skip


def _workload(
    cluster: Cluster,
    node: BudgetNode | None,
    user: str,
    gpus: int,
    submitted: datetime,
    index: int,
    **extra: object,
) -> Workload:
    fields = {
        "state": WorkloadState.PENDING,
        "min_runtime_s": 3600,
        "min_runtime_requested_s": 3600,
        "resumable": index % 2 == 0,
    }
    fields |= extra
    return Workload.objects.create(
        cluster=cluster, allocation=node, user_name=user, name=f"{['train', 'eval', 'sweep', 'debug'][index % 4]}-{index:03d}",
        workload_class=["batch", "batch", "interactive", "debug"][index % 4], gpus=gpus,
        state_changed_at=submitted, submitted_at=submitted, queued_at=submitted, **fields,
    )  # fmt: skip


def _reason(index: int, node: BudgetNode, gpus: int, now: datetime) -> dict:
    if index % 3 == 2:
        return {"code": "WAITING_FOR_GPUS", "params": {"gpus": gpus},
                "message": f"needs {gpus_phrase(gpus)} on one node; the earliest free at ~{(now + timedelta(minutes=40)):%H:%M} when protected work ends",
                "estimated_start": now + timedelta(minutes=40)}  # fmt: skip
    _code, _params, message, _estimate = fair_share_queued(index, node.path, 1.1 + index / 100)
    return {"code": "FAIR_SHARE_QUEUED", "params": {"ahead": index, "allocation": node.path}, "message": message,
            "estimated_start": now + timedelta(minutes=10 + 5 * index)}  # fmt: skip


def _running(
    cluster: Cluster,
    node: BudgetNode,
    user: str,
    machine: Node,
    gpus: int,
    now: datetime,
    index: int,
    rng: random.Random,
) -> None:
    started = now - timedelta(hours=1 + index)
    workload = _workload(cluster, node, user, gpus, started - timedelta(minutes=5), index, state=WorkloadState.RUNNING,
                         first_started_at=started, attempt=1, requeue_count=index % 3)  # fmt: skip
    Run.objects.create(workload=workload, cluster=cluster, allocation=node, user_name=user, attempt=1, gpus=gpus,
                       placement=[[machine.name, gpus]], started_at=started, protected_until=started + timedelta(hours=2),
                       wait_s=300.0)  # fmt: skip
    busy = 3.0 if index == 1 else 70 + 25 * rng.random()  # workload 1 is idle but holds its GPUs
    UtilisationSample.objects.bulk_create([
        UtilisationSample(workload=workload, cluster=cluster, at=now - timedelta(minutes=m), gpus=gpus, gpu_utilisation=busy)
        for m in (2, 12, 22)
    ])  # fmt: skip


def _finished(cluster: Cluster, node: BudgetNode, user: str, now: datetime, index: int) -> None:
    submitted = now - timedelta(hours=20 + index)
    workload = _workload(cluster, node, user, 4, submitted, index, state=WorkloadState.COMPLETED, attempt=2,
                         requeue_count=1, first_started_at=submitted + timedelta(minutes=3),
                         finished_at=submitted + timedelta(hours=5))  # fmt: skip
    first = submitted + timedelta(minutes=3)
    Run.objects.create(workload=workload, cluster=cluster, allocation=node, user_name=user, attempt=1, gpus=4, placement=[],
                       started_at=first, protected_until=first + timedelta(hours=1), ended_at=first + timedelta(hours=2),
                       end_reason=EndReason.PREEMPTED, wait_s=180.0)  # fmt: skip
    second = first + timedelta(hours=2, minutes=10)
    Run.objects.create(workload=workload, cluster=cluster, allocation=node, user_name=user, attempt=2, gpus=4, placement=[],
                       started_at=second, protected_until=second + timedelta(hours=1), ended_at=submitted + timedelta(hours=5),
                       end_reason=EndReason.COMPLETED, wait_s=600.0)  # fmt: skip
