"""Terse builders for policy snapshots: the tests read as the situation they describe."""

from __future__ import annotations

from scheduling.policy import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingWorkload,
    RunningWorkload,
    Snapshot,
)

NOW = 1_000_000.0
HOUR = 3600.0


def tree(*specs: tuple) -> tuple[BudgetNodeSpec, ...]:
    """tree(("org", None, 100), ("org/a", "org", 60), ...); a 4th item is a concurrency limit."""
    return tuple(BudgetNodeSpec(path, parent, float(budget), *rest) for path, parent, budget, *rest in specs)


# Two levels under the root, an unbudgeted leaf ("org/a/y") among them: the shortcut tests' tree.
SMALL_TREE = tree(
    ("org", None, 100),
    ("org/a", "org", 60),
    ("org/b", "org", 40),
    ("org/a/x", "org/a", 30),
    ("org/a/y", "org/a", 0),
    ("org/b/z", "org/b", 40),
)


def nodes(count: int, gpus: int = 8, gpu_type: str = "H100", domain: str = "d0", prefix: str = "n"):
    return tuple(ClusterNodeSpec(f"{prefix}{i}", gpus, gpu_type, domain) for i in range(count))


def pending(id: int, allocation: str, gpus: int, **fields) -> PendingWorkload:
    fields.setdefault("user", "alice")
    fields.setdefault("submitted_at", NOW - 100 + id)
    return PendingWorkload(id=id, allocation=allocation, gpus=gpus, **fields)


def running(id: int, allocation: str, placement: dict[str, int], **fields) -> RunningWorkload:
    fields.setdefault("user", "bob")
    fields.setdefault("started_at", NOW - 2 * HOUR)
    fields.setdefault("protected_until", fields["started_at"])
    fields.setdefault("resumable", True)
    fields.setdefault("funded", True)
    return RunningWorkload(
        id=id,
        allocation=allocation,
        gpus=sum(placement.values()),
        placement=tuple(sorted(placement.items())),
        **fields,
    )


def snapshot(budget_tree, cluster_nodes, run=(), queue=(), usage=None, **fields) -> Snapshot:
    return Snapshot(
        cluster="test",
        tree=budget_tree,
        nodes=cluster_nodes,
        running=tuple(run),
        pending=tuple(queue),
        usage=usage or {},
        **fields,
    )


def order(plan) -> list[int]:
    """Pending workload ids in the plan's cluster order."""
    return [reason.workload_id for reason in sorted(plan.reasons, key=lambda reason: reason.position)]


def reason_of(plan, workload_id: int):
    return next(reason for reason in plan.reasons if reason.workload_id == workload_id)
