"""Benchmark one full live scheduling pass against the database in DATABASE_URL.

    python -m benchmarks.live_pass --pending 50000 --nodes 2000 --json

Builds a cluster of ``--nodes`` 8-GPU simulated nodes, every node busy with protected work, a
budget tree of ~200 allocations with a week of usage history, and ``--pending`` queued workloads
of mixed shapes from 150 users; then runs ``--passes`` passes 10 s apart (after one warm-up pass
that writes every pending reason for the first time) and prints p50 / p95 of the whole pass and
the median of each phase. ``--churn N`` makes N running jobs end between two passes, so every
pass also starts work and rewrites the positions behind it. Everything it creates lives under a
cluster and a budget root named
``bench-<pid>`` and is deleted afterwards. Migrations are applied first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("SECRET_KEY", "benchmark-only")
    import django

    django.setup()


def build(*, name: str, nodes: int, pending: int, now: datetime, churn: int = 0, seed: int = 7):  # noqa: ANN201
    """Create the benchmark cluster, tree, running and pending work (bulk inserts only)."""
    from decimal import Decimal

    from budgets.models import Allocation, BudgetNode
    from scheduling.accounting import hour_floor
    from scheduling.models import (
        AllocationHour,
        Cluster,
        Node,
        PassLease,
        Run,
        SimulatedJob,
        SimulatedNode,
        Workload,
    )  # fmt: skip

    rng = random.Random(seed)
    cluster = Cluster.objects.create(name=name, slug=name, gpu_type="A100")
    node_rows = [Node(cluster=cluster, name=f"{name}-n{i:05d}", gpus=8, gpu_type="A100", topology_domain=f"ib{i // 32:03d}")
                 for i in range(nodes)]  # fmt: skip
    Node.objects.bulk_create(node_rows, batch_size=2000)
    SimulatedNode.objects.bulk_create(
        [
            SimulatedNode(cluster=cluster, name=n.name, gpus=8, gpu_type="A100", domain=n.topology_domain)
            for n in node_rows
        ],
        batch_size=2000,
    )
    root = BudgetNode.objects.create(name=name, slug=name, path=name)
    leaves = []
    for p in range(10):
        program = BudgetNode.objects.create(name=f"p{p}", slug=f"p{p}", parent=root, path=f"{name}/p{p}")
        for t in range(5):
            team = BudgetNode.objects.create(
                name=f"t{t}", slug=f"t{t}", parent=program, path=f"{program.path}/t{t}"
            )
            for j in range(3):
                leaves.append(
                    BudgetNode.objects.create(
                        name=f"j{j}", slug=f"j{j}", parent=team, path=f"{team.path}/j{j}"
                    )
                )
    total = nodes * 8
    allocations = [Allocation(node=root, cluster=cluster, gpus=Decimal(int(total * 0.85)))]
    for node in BudgetNode.objects.filter(path__startswith=f"{name}/"):
        depth = node.path.count("/")
        allocations.append(
            Allocation(
                node=node, cluster=cluster, gpus=Decimal(round(total * 0.85 / [10, 50, 150][depth - 1], 1))
            )
        )
    Allocation.objects.bulk_create(allocations)
    hour = hour_floor(now)
    AllocationHour.objects.bulk_create(
        [AllocationHour(cluster=cluster, allocation=leaf, hour=hour - timedelta(hours=h), used_gpu_s=rng.uniform(0, 3600 * 64),
                        delivered_gpu_s=0.0) for leaf in leaves for h in range(1, 169)],
        batch_size=5000,
    )  # fmt: skip
    PassLease.objects.create(cluster=cluster, accounted_until=now, owed_until=now)
    users = [f"user{u:03d}" for u in range(150)]
    running = [
        Workload(cluster=cluster, allocation=rng.choice(leaves), user_name=rng.choice(users), gpus=8, min_runtime_s=8 * 3600,
                 state="running", submitted_at=now - timedelta(hours=2), queued_at=now - timedelta(hours=2),
                 state_changed_at=now - timedelta(hours=1), first_started_at=now - timedelta(hours=1), attempt=1,
                 backend_ref="", metadata={"duration_s": 86400 * 30})
        for _ in range(nodes)
    ]  # fmt: skip
    Workload.objects.bulk_create(running, batch_size=2000)
    started = now - timedelta(hours=1)
    Run.objects.bulk_create(
        [Run(workload=w, cluster=cluster, allocation_id=w.allocation_id, user_name=w.user_name, attempt=1, gpus=8,
             placement=[[n.name, 8]], funded=True, started_at=started, protected_until=now + timedelta(hours=7))
         for w, n in zip(running, node_rows, strict=True)],
        batch_size=2000,
    )  # fmt: skip

    # With churn, `churn` running jobs end in each 10 s between passes (their GPUs go to queued work).
    def duration(index: int) -> float:
        return 3600.0 + 10.0 * (index // churn) + 5.0 if churn else 86400.0 * 30

    SimulatedJob.objects.bulk_create(
        [SimulatedJob(cluster=cluster, ref=f"{name}-{w.pk}", workload_id=w.pk, attempt=1, state="running",
                      placement=[[n.name, 8]], gpus=8, duration_s=duration(i), started_at=started.timestamp())
         for i, (w, n) in enumerate(zip(running, node_rows, strict=True))],
        batch_size=2000,
    )  # fmt: skip
    Workload.objects.filter(cluster=cluster, state="running").update(backend_ref=f"{name}-running")
    for workload in running:
        workload.backend_ref = f"{name}-{workload.pk}"
    Workload.objects.bulk_update(running, ["backend_ref"], batch_size=2000)
    shapes = [1, 1, 2, 4, 4, 8, 8, 8, 16, 32, 64]
    queued = [
        Workload(cluster=cluster, allocation=rng.choice(leaves), user_name=rng.choice(users), gpus=rng.choice(shapes),
                 workload_class=rng.choice(["batch", "batch", "batch", "interactive", "debug"]),
                 min_runtime_s=rng.choice([0, 600, 3600, 4 * 3600]), resumable=rng.random() < 0.6,
                 max_runtime_s=rng.choice([None, 3600, 4 * 3600, 86400]),
                 submitted_at=now - timedelta(seconds=rng.uniform(0, 86400)), queued_at=now, state_changed_at=now,
                 backend_ref=f"{name}-queued")
        for _ in range(pending)
    ]  # fmt: skip
    Workload.objects.bulk_create(queued, batch_size=5000)
    return cluster, root


def teardown(cluster, root) -> None:  # noqa: ANN001
    from budgets.models import BudgetNode
    from scheduling.models import Run, Workload

    Run.objects.filter(cluster=cluster).delete()
    Workload.objects.filter(cluster=cluster).delete()
    cluster.delete()
    for depth in (3, 2, 1):
        BudgetNode.objects.filter(
            path__startswith=f"{root.path}/", path__regex=r"^[^/]+" + r"/[^/]+" * depth + "$"
        ).delete()
    root.delete()


def measure(*, cluster, passes: int, now: datetime) -> dict:  # noqa: ANN001
    import inspect

    from scheduling.models import SchedulingPass
    from scheduling.passes import run_pass

    # the passes remember between them what a worker's do (older commits: the process itself did)
    kept = {}
    if "memory" in inspect.signature(run_pass).parameters:
        from scheduling.pass_cache import PassMemory

        kept = {"memory": PassMemory()}
    warm = run_pass(cluster_id=cluster.pk, now=now, **kept)
    first = SchedulingPass.objects.get(pk=warm.pass_id)
    records = []
    for index in range(1, passes + 1):
        outcome = run_pass(cluster_id=cluster.pk, now=now + timedelta(seconds=10 * index), **kept)
        records.append(SchedulingPass.objects.get(pk=outcome.pass_id))
    totals = sorted(r.total_ms for r in records)

    def median(field: str) -> float:
        return round(statistics.median(getattr(r, field) for r in records), 1)

    return {
        "p50_ms": round(statistics.median(totals), 1),
        "p95_ms": round(totals[min(len(totals) - 1, round(0.95 * (len(totals) - 1)))], 1),
        "max_ms": round(totals[-1], 1),
        "phases_median_ms": {
            "reconcile": median("reconcile_ms"),
            "snapshot_read": median("snapshot_ms"),
            "plan": median("plan_ms"),
            "persist": median("persist_ms"),
            "dispatch": median("dispatch_ms"),
        },  # fmt: skip
        "first_pass_ms": round(first.total_ms, 1),
        "first_pass_reasons_written": first.reasons_written,
        "reasons_written_median": statistics.median(r.reasons_written for r in records),
        "started_median": statistics.median(r.started_count for r in records),
        "status": sorted({r.status for r in records}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=50000)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=9, help="measured passes after the warm-up")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark data")
    parser.add_argument(
        "--churn", type=int, default=0, help="running jobs that end between two passes (default 0)"
    )
    args = parser.parse_args(argv)
    _setup_django()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    name = f"bench-{os.getpid()}"
    now = datetime.now(tz=UTC).replace(microsecond=0)
    began = time.perf_counter()
    cluster, root = build(name=name, nodes=args.nodes, pending=args.pending, now=now, churn=args.churn)
    setup_s = time.perf_counter() - began
    try:
        result = {"pending": args.pending, "nodes": args.nodes, "running": args.nodes, "churn": args.churn,
                  "database": connection.vendor,
                  **measure(cluster=cluster, passes=args.passes, now=now), "setup_s": round(setup_s, 1)}  # fmt: skip
    finally:
        if not args.keep:
            teardown(cluster, root)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
