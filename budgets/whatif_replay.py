"""What a what-if replays: the recorded workloads of the period, plus what only the rollups know.

The live scheduler records every workload and run; the hourly rollups (``AllocationHour``) are folded
from those runs. A demo or an imported history may hold *only* rollups for most of the period
(``portal.demo_history`` writes weeks of them and a few minutes of live workloads). Replaying just
the workloads would then simulate a fraction of the load the delivery pages show, so the replay
adds, per allocation and block of ``SYNTHETIC_BLOCK_H`` hours, synthetic jobs for the GPU-seconds
the rollups hold and the recorded runs do not explain:

    remainder(allocation, block) = max(rollup(allocation, block) - recorded(allocation, block), 0)
    rollup = the GPU-seconds the allocation's funded work ran (``delivered``); ``used`` for work
             charged to no allocation
    recorded = GPU-seconds of the recorded runs charged to it inside the block

On a cluster the live scheduler ran for the whole period the remainder is ~0 and nothing is
synthesized. A synthetic job is resumable batch work of at most one node's GPUs, submitted at the
block's start and lasting the block, so the scale (GPU-hours per allocation) matches the delivery
page; the waits of synthetic jobs are not reported (they are not anyone's workload).

Why what ran and not what was owed: the rollups record exactly what ran, but not when unmet demand
was queued nor how much there was beyond the entitlement (owed is capped by it), so the replay's
"before" delivered reproduces the delivery page, while its owed counts only the demand that ran
(an allocation the history shows under-served reads near 100% "before": compare the GPU-hours).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from budgets.models import BudgetNode
from scheduling.accounting import hour_floor
from scheduling.models import AllocationHour, Cluster, Node, Run, Workload
from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec
from scheduling.simulator import SimJob, SimulationInput

MAX_JOBS = 20000
SYNTHETIC_BLOCK_H = 4
SYNTHETIC_KIND = "from-rollups"
SYNTHETIC_ID_BASE = 10**12  # far above any workload id
UNALLOCATED = "~unallocated"


@dataclass(frozen=True)
class Replay:
    """The simulator's input and how many of its jobs were recorded workloads or synthesized."""

    inputs: SimulationInput
    recorded: int
    synthesized: int


def replay_build(*, cluster: Cluster, budgets: dict[str, float], now: datetime, days: int) -> Replay:
    """The cluster's nodes, the tree with ``budgets``, and the jobs of the last ``days`` days."""
    start = now - timedelta(days=days)
    recorded = recorded_jobs(cluster=cluster, start=start, now=now)
    synthetic = synthesized_jobs(cluster=cluster, start=start, now=now, room=MAX_JOBS - len(recorded))
    inputs = SimulationInput(
        name=f"what-if {cluster.slug}", cluster_nodes=cluster_nodes(cluster), tree=budget_specs(budgets),
        jobs=tuple(sorted((*recorded, *synthetic), key=lambda job: (job.submit_s, job.id))), days=days,
    )  # fmt: skip
    return Replay(inputs=inputs, recorded=len(recorded), synthesized=len(synthetic))


def cluster_nodes(cluster: Cluster) -> tuple[ClusterNodeSpec, ...]:
    rows = Node.objects.filter(cluster=cluster).order_by("name")
    return tuple(
        ClusterNodeSpec(name=n, gpus=g, gpu_type=t, domain=d, healthy=True)
        for n, g, t, d in rows.values_list("name", "gpus", "gpu_type", "topology_domain")
    )


def budget_specs(budgets: dict[str, float]) -> tuple[BudgetNodeSpec, ...]:
    parents = dict(BudgetNode.objects.values_list("path", "parent__path"))
    return tuple(
        BudgetNodeSpec(path=p, parent=parents[p], budget=budgets.get(p, 0.0)) for p in sorted(parents)
    )


def recorded_jobs(*, cluster: Cluster, start: datetime, now: datetime) -> list[SimJob]:
    """Workloads submitted in [start, now): as long as they really ran (else their declared maximum
    runtime, else an hour, for work that never ran)."""
    ran: dict[int, float] = defaultdict(float)
    for workload_id, started, ended in Run.objects.filter(
        cluster=cluster, workload__submitted_at__gte=start
    ).values_list("workload_id", "started_at", "ended_at"):
        ran[workload_id] += ((ended or now) - started).total_seconds()
    rows = Workload.objects.filter(cluster=cluster, submitted_at__gte=start, submitted_at__lt=now).order_by(
        "submitted_at", "id"
    )
    jobs = []
    for w in rows.values("id", "allocation__path", "user_name", "gpus", "submitted_at", "workload_class",
                         "min_runtime_s", "resumable", "max_runtime_s", "gpus_per_node")[:MAX_JOBS]:  # fmt: skip
        duration = ran.get(w["id"]) or float(w["max_runtime_s"] or 3600)
        jobs.append(SimJob(
            id=w["id"], allocation=w["allocation__path"] or UNALLOCATED, user=w["user_name"], gpus=w["gpus"],
            submit_s=(w["submitted_at"] - start).total_seconds(), duration_s=max(duration, 1.0),
            workload_class=w["workload_class"], min_runtime_s=float(w["min_runtime_s"]), resumable=w["resumable"],
            max_runtime_s=float(w["max_runtime_s"]) if w["max_runtime_s"] else None, gpus_per_node=w["gpus_per_node"],
        ))  # fmt: skip
    return jobs


def _block(hour: datetime, start: datetime) -> int:
    return int((hour - start).total_seconds() // (SYNTHETIC_BLOCK_H * 3600))


def rollup_seconds(*, cluster: Cluster, start: datetime, now: datetime) -> dict[tuple[str, int], float]:
    """(allocation path, block) -> the GPU-seconds the rollups hold (see the module docstring)."""
    totals: dict[tuple[str, int], float] = defaultdict(float)
    rows = AllocationHour.objects.filter(cluster=cluster, hour__gte=hour_floor(start), hour__lt=now)
    for path, hour, used, delivered in rows.values_list(
        "allocation__path", "hour", "used_gpu_s", "delivered_gpu_s"
    ):
        seconds = delivered if path else used
        totals[(path or UNALLOCATED, max(_block(hour, start), 0))] += seconds
    return totals


def recorded_seconds(*, cluster: Cluster, start: datetime, now: datetime) -> dict[tuple[str, int], float]:
    """(allocation path, block) -> GPU-seconds of recorded runs, split at block boundaries."""
    totals: dict[tuple[str, int], float] = defaultdict(float)
    block_s = SYNTHETIC_BLOCK_H * 3600.0
    runs = Run.objects.filter(cluster=cluster, started_at__lt=now).exclude(ended_at__lt=start)
    for path, gpus, started, ended in runs.values_list("allocation__path", "gpus", "started_at", "ended_at"):
        begin = max((started - start).total_seconds(), 0.0)
        end = ((ended or now) - start).total_seconds()
        while begin < end:
            block = int(begin // block_s)
            piece_end = min(end, (block + 1) * block_s)
            totals[(path or UNALLOCATED, block)] += gpus * (piece_end - begin)
            begin = piece_end
    return totals


def synthesized_jobs(*, cluster: Cluster, start: datetime, now: datetime, room: int) -> list[SimJob]:
    """Jobs for what the rollups hold beyond the recorded runs, at most ``room`` of them."""
    node_gpus = max(Node.objects.filter(cluster=cluster).values_list("gpus", flat=True), default=8)
    recorded = recorded_seconds(cluster=cluster, start=start, now=now)
    block_s = SYNTHETIC_BLOCK_H * 3600.0
    jobs: list[SimJob] = []
    for (path, block), seconds in sorted(rollup_seconds(cluster=cluster, start=start, now=now).items()):
        submit_s = block * block_s
        duration = min(block_s, max((now - start).total_seconds() - submit_s, 1.0))
        gpus = round(max(seconds - recorded.get((path, block), 0.0), 0.0) / duration)
        for size in _pieces(gpus, node_gpus):
            if len(jobs) >= room:
                return jobs
            jobs.append(SimJob(
                id=SYNTHETIC_ID_BASE + len(jobs), allocation=path, user="(history)", gpus=size,
                submit_s=submit_s, duration_s=duration, workload_class="batch", min_runtime_s=min(3600.0, duration),
                resumable=True, kind=SYNTHETIC_KIND,
            ))  # fmt: skip
    return jobs


def _pieces(gpus: int, node_gpus: int) -> list[int]:
    """``gpus`` as whole nodes plus one remainder, e.g. 19 on 8-GPU nodes -> [8, 8, 3]."""
    full, rest = divmod(max(gpus, 0), node_gpus)
    return [node_gpus] * full + ([rest] if rest else [])
