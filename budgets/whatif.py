"""What-if: replay the last days' recorded workloads through the simulator with edited budgets.

The same recorded jobs run twice through :func:`scheduling.simulator.run_simulation` (the real
policy on a virtual clock): once with today's budgets, once with the edits; the page shows each
allocation's delivered / owed before and after. It runs in a background thread of the web process
(so it works in ``make demo`` without a worker) and writes its progress to the ``WhatIfRun`` row,
which the page polls with htmx. Durations are what the workloads really ran (or their declared
maximum runtime, or one hour, for work that never ran).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db import close_old_connections, transaction
from django.utils import timezone

from budgets.models import Allocation, BudgetNode, Membership, Role
from budgets.paths import in_subtree
from budgets.selectors import TreeRow, User, budget_tree
from portal.models import WhatIfRun, WhatIfStatus
from scheduling.models import Cluster, Node, Run, Workload
from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec
from scheduling.simulator import SimJob, SimulationInput, policy_config, run_simulation

logger = logging.getLogger(__name__)
MAX_DAYS = 28
MAX_JOBS = 20000


def editable_rows(*, cluster: Cluster, user: User) -> list[TreeRow]:
    return budget_tree(cluster=cluster, user=user).rows


def parse_budget_edits(data: Mapping[str, str]) -> dict[str, float]:
    """``budget-<node id>`` fields -> {node path: GPUs}; blanks and bad numbers are ignored."""
    edits: dict[int, float] = {}
    for key, value in data.items():
        if key.startswith("budget-") and str(value).strip():
            try:
                edits[int(key.removeprefix("budget-"))] = max(float(value), 0.0)
            except ValueError:
                continue
    paths = dict(BudgetNode.objects.filter(pk__in=edits).values_list("pk", "path"))
    return {paths[pk]: gpus for pk, gpus in edits.items() if pk in paths}


def parse_days(value: object) -> int:
    """The replay length in days, 1..MAX_DAYS; anything unreadable is a week."""
    try:
        return min(max(int(str(value)), 1), MAX_DAYS)
    except ValueError:
        return 7


def may_run_whatif(user: User) -> bool:
    """A replay costs two simulations: managers (of any node) and staff may start one."""
    return bool(
        user.is_authenticated
        and (user.is_staff or Membership.objects.filter(user=user, role=Role.MANAGER).exists())
    )


def whatif_start(*, cluster: Cluster, user: User, budgets: dict[str, float], days: int) -> WhatIfRun:
    """Queue a replay; PermissionDenied unless :func:`may_run_whatif`."""
    if not may_run_whatif(user):
        raise PermissionDenied("Only managers and on-call staff may run a what-if.")
    run = WhatIfRun.objects.create(
        cluster=cluster, requested_by=user if user.is_authenticated else None,
        budgets=budgets, days=min(max(days, 1), MAX_DAYS),
    )  # fmt: skip
    transaction.on_commit(lambda: threading.Thread(target=_in_thread, args=(run.pk,), daemon=True).start())
    return run


def _in_thread(run_id: int) -> None:
    """A background thread gets its own database connection, closed when it is done."""
    close_old_connections()
    try:
        whatif_execute(run_id)
    finally:
        close_old_connections()


def whatif_execute(run_id: int) -> None:
    """Run both simulations and store the comparison; failures end up on the row, not in a log only."""
    try:
        run = WhatIfRun.objects.select_related("cluster").get(pk=run_id)
        WhatIfRun.objects.filter(pk=run_id).update(status=WhatIfStatus.RUNNING, progress=0.0)
        run.result = whatif_compare(run=run, now=timezone.now())
        run.status, run.progress = WhatIfStatus.DONE, 1.0
        run.save(update_fields=["result", "status", "progress"])
    except Exception as error:  # the page must say it failed
        logger.exception("what-if %s failed", run_id)
        WhatIfRun.objects.filter(pk=run_id).update(status=WhatIfStatus.FAILED, error=str(error)[:2000])


def whatif_compare(*, run: WhatIfRun, now: datetime) -> dict:
    current = current_budgets(cluster=run.cluster)
    edited = {**current, **run.budgets}
    base = simulation_input(cluster=run.cluster, budgets=current, now=now, days=run.days)
    config = policy_config("fairshare", window_s=run.cluster.window_days * 86400.0)

    def report(offset: float):  # noqa: ANN202
        return lambda fraction: WhatIfRun.objects.filter(pk=run.pk).update(progress=offset + fraction / 2)

    before = run_simulation(base, config=config, progress=report(0.0))
    after_input = simulation_input(cluster=run.cluster, budgets=edited, now=now, days=run.days)
    after = run_simulation(after_input, config=config, progress=report(0.5))
    return compare_results(before.per_team, after.per_team, current=current, edited=edited)


def compare_results(
    before: list[dict], after: list[dict], *, current: dict[str, float], edited: dict[str, float]
) -> dict:
    """Per allocation: budget and delivered / owed before and after; those whose budget or an
    ancestor's budget changed come first (``changed``)."""
    by_path: dict[str, dict] = {}
    for side, rows in (("before", before), ("after", after)):
        for row in rows:
            entry = by_path.setdefault(row["allocation"], {"allocation": row["allocation"]})
            entry[f"{side}_ratio"] = row["delivered_owed_ratio"]
            entry[f"{side}_delivered_gpu_h"] = row["delivered_gpu_hours"]
            entry[f"{side}_owed_gpu_h"] = row["owed_gpu_hours"]
    changed = sorted(p for p in edited if edited[p] != current.get(p, 0.0))
    for path, entry in by_path.items():
        entry["budget_before"] = current.get(path, 0.0)
        entry["budget_after"] = edited.get(path, 0.0)
        entry["changed"] = any(in_subtree(path, c) for c in changed)  # itself or under an edit
    rows = sorted(by_path.values(), key=lambda e: (not e["changed"], e["allocation"]))
    edits = [{"path": p, "before": current.get(p, 0.0), "after": edited[p]} for p in changed]
    return {"rows": rows, "edited": changed, "edits": edits}


def current_budgets(*, cluster: Cluster) -> dict[str, float]:
    return {
        path: float(gpus)
        for path, gpus in Allocation.objects.filter(cluster=cluster).values_list("node__path", "gpus")
    }


def simulation_input(
    *, cluster: Cluster, budgets: dict[str, float], now: datetime, days: int
) -> SimulationInput:
    """The cluster's nodes, the tree with ``budgets``, and the workloads submitted in the last ``days``."""
    start = now - timedelta(days=days)
    nodes = tuple(
        ClusterNodeSpec(name=n, gpus=g, gpu_type=t, domain=d, healthy=True)
        for n, g, t, d in Node.objects.filter(cluster=cluster).order_by("name").values_list("name", "gpus", "gpu_type", "topology_domain")
    )  # fmt: skip
    parents = dict(BudgetNode.objects.values_list("path", "parent__path"))
    tree = tuple(
        BudgetNodeSpec(path=p, parent=parents[p], budget=budgets.get(p, 0.0)) for p in sorted(parents)
    )
    return SimulationInput(
        name=f"what-if {cluster.slug}", cluster_nodes=nodes, tree=tree,
        jobs=tuple(recorded_jobs(cluster=cluster, start=start, now=now)), days=days,
    )  # fmt: skip


def recorded_jobs(*, cluster: Cluster, start: datetime, now: datetime) -> list[SimJob]:
    ran: dict[int, float] = {}
    for workload_id, started, ended in Run.objects.filter(
        cluster=cluster, workload__submitted_at__gte=start
    ).values_list("workload_id", "started_at", "ended_at"):
        ran[workload_id] = ran.get(workload_id, 0.0) + ((ended or now) - started).total_seconds()
    rows = Workload.objects.filter(cluster=cluster, submitted_at__gte=start, submitted_at__lt=now).order_by(
        "submitted_at", "id"
    )
    jobs = []
    for w in rows.values("id", "allocation__path", "user_name", "gpus", "submitted_at", "workload_class",
                         "min_runtime_s", "resumable", "max_runtime_s", "gpus_per_node")[:MAX_JOBS]:  # fmt: skip
        duration = ran.get(w["id"]) or float(w["max_runtime_s"] or 3600)
        jobs.append(SimJob(
            id=w["id"], allocation=w["allocation__path"] or "~unallocated", user=w["user_name"], gpus=w["gpus"],
            submit_s=(w["submitted_at"] - start).total_seconds(), duration_s=max(duration, 1.0),
            workload_class=w["workload_class"], min_runtime_s=float(w["min_runtime_s"]), resumable=w["resumable"],
            max_runtime_s=float(w["max_runtime_s"]) if w["max_runtime_s"] else None, gpus_per_node=w["gpus_per_node"],
        ))  # fmt: skip
    return jobs
