"""Phase 2 of the pass: one read of the database into the policy's plain dataclasses.

Set-based: a handful of ``values_list`` queries whatever the queue length, no per-row queries.
Work charged to no budget node is given the synthetic allocation ``UNALLOCATED`` (budget 0).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from budgets.models import Allocation, BudgetNode
from scheduling.accounting import entitlements, usage_in_window, user_usage_in_window
from scheduling.models import Cluster, Node, Run, Workload, WorkloadState
from scheduling.policy import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingWorkload,
    PolicyConfig,
    RunningWorkload,
    Snapshot,
)

UNALLOCATED = "~unallocated"


@dataclass(frozen=True)
class PassInputs:
    snapshot: Snapshot
    config: PolicyConfig
    path_ids: dict[str, int]  # allocation path -> budget node id
    funded_ids: set[int]  # budget node ids with a budget > 0 on this cluster
    owed_gpus: dict[int, float]  # budget node id -> min(entitlement, demand) now, in GPUs


def policy_config(cluster: Cluster) -> PolicyConfig:
    return PolicyConfig(
        window_s=cluster.window_days * 86400.0, min_runtime_cap_s=float(cluster.min_runtime_cap_s)
    )


def budget_tree(cluster: Cluster) -> tuple[dict[int, str], dict[str, str | None], dict[str, float]]:
    """(id -> path, path -> parent path, path -> budget on this cluster) for every budget node."""
    rows = list(BudgetNode.objects.values_list("id", "path", "parent_id"))
    paths = {node_id: path for node_id, path, _ in rows}
    parents = {path: paths.get(parent_id) for _, path, parent_id in rows}
    budgets = dict.fromkeys(parents, 0.0)
    for node_id, gpus in Allocation.objects.filter(cluster=cluster).values_list("node_id", "gpus"):
        budgets[paths[node_id]] = float(gpus)
    return paths, parents, budgets


def funded_allocation_ids(cluster: Cluster) -> set[int]:
    return set(Allocation.objects.filter(cluster=cluster, gpus__gt=0).values_list("node_id", flat=True))


def _ts(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _running(cluster: Cluster, paths: dict[int, str]) -> tuple[RunningWorkload, ...]:
    rows = (
        Run.objects.filter(cluster=cluster, ended_at__isnull=True)
        .order_by("workload_id")
        .values_list(
            "workload_id",
            "allocation_id",
            "user_name",
            "gpus",
            "placement",
            "started_at",
            "protected_until",
            "workload__resumable",
            "funded",
            "workload__workload_class",
            "workload__max_runtime_s",
            "workload__submitted_at",
        )
    )
    return tuple(
        RunningWorkload(
            id=wid,
            allocation=paths.get(alloc, UNALLOCATED),
            user=user,
            gpus=gpus,
            placement=tuple(sorted((node, int(n)) for node, n in placement)),
            started_at=started.timestamp(),
            protected_until=protected.timestamp(),
            resumable=resumable,
            funded=funded,
            workload_class=klass,
            expected_end=started.timestamp() + max_rt if max_rt else None,
            submitted_at=submitted.timestamp(),
        )
        for wid, alloc, user, gpus, placement, started, protected, resumable, funded, klass, max_rt, submitted in rows
    )


def _pending(cluster: Cluster, paths: dict[int, str]) -> tuple[PendingWorkload, ...]:
    rows = (
        Workload.objects.filter(
            cluster=cluster, state=WorkloadState.PENDING, cancel_requested_at__isnull=True
        )
        .order_by("id")
        .values_list(
            "id",
            "allocation_id",
            "user_name",
            "gpus",
            "submitted_at",
            "gpus_per_node",
            "gpu_type",
            "workload_class",
            "min_runtime_s",
            "resumable",
            "max_runtime_s",
            "held",
            "held_by",
            "held_at",
            "held_note",
        )
    )
    return tuple(
        PendingWorkload(
            id=wid,
            allocation=paths.get(alloc, UNALLOCATED),
            user=user,
            gpus=gpus,
            submitted_at=submitted.timestamp(),
            gpus_per_node=per_node,
            gpu_type=gpu_type or None,
            workload_class=klass,
            min_runtime_s=float(min_rt),
            resumable=resumable,
            max_runtime_s=float(max_rt) if max_rt else None,
            held=held,
            held_by=held_by,
            held_at=_ts(held_at),
            held_note=held_note,
        )
        for wid, alloc, user, gpus, submitted, per_node, gpu_type, klass, min_rt, resumable, max_rt, held, held_by, held_at, held_note in rows
    )


def _nodes(cluster: Cluster) -> tuple[ClusterNodeSpec, ...]:
    rows = (
        Node.objects.filter(cluster=cluster)
        .order_by("name")
        .values_list("name", "gpus", "gpu_type", "topology_domain", "healthy")
    )
    return tuple(ClusterNodeSpec(name=n, gpus=g, gpu_type=t, domain=d, healthy=h) for n, g, t, d, h in rows)


def owed_rates(
    *, snapshot: Snapshot, parents: dict[str, str | None], budgets: dict[str, float], path_ids: dict[str, int]
) -> dict[int, float]:
    """min(entitlement, demand) in GPUs per funded allocation; demand = its own funded running + pending GPUs."""
    available = sum(node.gpus for node in snapshot.nodes if node.healthy)
    entitled = entitlements(budgets=budgets, parents=parents, available_gpus=float(available))
    demand: dict[str, float] = defaultdict(float)
    for running in snapshot.running:
        demand[running.allocation] += running.gpus if running.funded else 0
    for pending in snapshot.pending:
        demand[pending.allocation] += 0 if pending.held else pending.gpus
    return {
        path_ids[path]: min(entitled.get(path, 0.0), wanted)
        for path, wanted in demand.items()
        if path in path_ids and budgets.get(path, 0.0) > 0
    }


def snapshot_read(*, cluster: Cluster, now: datetime, backend_name: str = "backend") -> PassInputs:
    paths, parents, budgets = budget_tree(cluster)
    config = policy_config(cluster)
    window = timedelta(seconds=config.window_s)
    usage = usage_in_window(cluster_id=cluster.pk, now=now, window=window)
    user_usage = user_usage_in_window(cluster_id=cluster.pk, now=now, window=window)
    tree = [BudgetNodeSpec(path=path, parent=parents[path], budget=budgets[path]) for path in sorted(parents)]
    tree.append(BudgetNodeSpec(path=UNALLOCATED, parent=None, budget=0.0))
    snapshot = Snapshot(
        cluster=cluster.slug,
        tree=tuple(tree),
        nodes=_nodes(cluster),
        running=_running(cluster, paths),
        pending=_pending(cluster, paths),
        usage=MappingProxyType({paths.get(a, UNALLOCATED): v for a, v in usage.items()}),
        user_usage=MappingProxyType({(paths.get(a, UNALLOCATED), u): v for (a, u), v in user_usage.items()}),
        backend_name=backend_name,
    )
    path_ids = {path: node_id for node_id, path in paths.items()}
    funded = {path_ids[p] for p, b in budgets.items() if b > 0}
    return PassInputs(
        snapshot=snapshot,
        config=config,
        path_ids=path_ids,
        funded_ids=funded,
        owed_gpus=owed_rates(snapshot=snapshot, parents=parents, budgets=budgets, path_ids=path_ids),
    )
