"""What-if: replay the period's recorded workloads through the simulator with edited budgets.

The same jobs (``budgets.whatif_replay``: the recorded workloads, plus what only the rollups know)
run twice through :func:`scheduling.simulator.run_simulation` (the real policy on a virtual clock):
once with today's budgets, once with the edits. The result holds, per allocation, the budget and
the delivered and owed GPU-hours before and after (and their ratio), and the waits per class.

A run is a Celery task (``budgets.tasks.whatif_run``, queued on commit on ``WHATIF_QUEUE``) that
writes its progress to the ``WhatIfRun`` row, which the page polls. A user has at most one run
queued or running, the site at most ``WHATIF_MAX_ACTIVE`` (both claimed in the database when the
run is created); a run no worker finished within ``WHATIF_STALE_S`` is marked failed, so a page
never polls for ever. Runs are visible to their author and to staff only.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as AuthUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from budgets.models import Allocation, BudgetNode, Membership, Role
from budgets.paths import in_subtree
from budgets.selectors import TreeRow, User, budget_tree
from budgets.whatif_replay import SYNTHETIC_KIND, budget_specs, replay_build
from portal.models import WhatIfRun, WhatIfStatus
from scheduling.models import Cluster, Node
from scheduling.simulator import SimulationResult, policy_config, run_simulation
from scheduling.snapshot import goodput_fields

logger = logging.getLogger(__name__)
DAYS_CHOICES = (1, 7, 14, 28)
ACTIVE = (WhatIfStatus.QUEUED, WhatIfStatus.RUNNING)


class WhatIfRefused(Exception):
    """A cap is reached: the user's one run, or the site's few, are still queued or running."""


@dataclass
class BudgetEdits:
    """Parsed form or API input: valid edits by node path, and errors by field name."""

    budgets: dict[str, float] = field(default_factory=dict)
    days: int = 7
    errors: dict[str, Any] = field(default_factory=dict)  # the API nests budgets: {"budgets": {path: why}}


def editable_rows(*, cluster: Cluster, user: User) -> list[TreeRow]:
    return budget_tree(cluster=cluster, user=user).rows


def cluster_gpus(cluster: Cluster) -> int:
    return sum(Node.objects.filter(cluster=cluster).values_list("gpus", flat=True))


def budget_error(value: object, *, installed: int) -> tuple[float | None, str]:
    """One budget in GPUs: (value, "") or (None, why it is refused). 0 is a valid budget."""
    try:
        gpus = float(str(value).strip())
    except ValueError:
        return None, f"“{value}” is not a number of GPUs; enter e.g. 8 or 12.5."
    if not math.isfinite(gpus):
        return None, "Enter a finite number of GPUs."
    if gpus < 0:
        return None, "A budget cannot be negative; 0 removes it."
    if gpus > installed:
        return None, f"Larger than the cluster ({installed} GPUs)."
    return gpus, ""


def parse_days(value: object) -> tuple[int, str]:
    try:
        days = int(str(value).strip())
    except ValueError:
        days = 0
    if days not in DAYS_CHOICES:
        return 7, f"Choose one of {', '.join(map(str, DAYS_CHOICES))} days."
    return days, ""


def parse_form(*, data: Mapping[str, str], cluster: Cluster) -> BudgetEdits:
    """``budget-<node id>`` fields and ``days``; blanks mean "unchanged", anything else is checked."""
    installed = cluster_gpus(cluster)
    raw = {key: str(value) for key, value in data.items() if key.startswith("budget-") and str(value).strip()}
    ids = {key: key.removeprefix("budget-") for key in raw}
    paths = dict(
        BudgetNode.objects.filter(pk__in=[i for i in ids.values() if i.isdigit()]).values_list("pk", "path")
    )
    edits = BudgetEdits()
    edits.days, days_error = parse_days(data.get("days", 7))
    if days_error:
        edits.errors["days"] = days_error
    for key, value in raw.items():
        node_id = ids[key]
        if not node_id.isdigit() or int(node_id) not in paths:
            edits.errors[key] = "No such budget node."
            continue
        gpus, error = budget_error(value, installed=installed)
        if gpus is None:
            edits.errors[key] = error
        else:
            edits.budgets[paths[int(node_id)]] = gpus
    return edits


def parse_api(*, data: Mapping, cluster: Cluster) -> BudgetEdits:
    """``{"days": 7, "budgets": {"node path": GPUs}}``; errors as DRF nests them:
    ``{"budgets": {"node path": why}, "days": why}``."""
    installed = cluster_gpus(cluster)
    edits = BudgetEdits()
    edits.days, days_error = parse_days(data.get("days", 7))
    if days_error:
        edits.errors["days"] = days_error
    budgets = data.get("budgets") or {}
    if not isinstance(budgets, Mapping):
        edits.errors["budgets"] = "A mapping of budget node path to GPUs."
        return edits
    known = set(BudgetNode.objects.filter(path__in=[str(p) for p in budgets]).values_list("path", flat=True))
    for path, value in budgets.items():
        gpus, error = (
            (None, "No such budget node.")
            if str(path) not in known
            else budget_error(value, installed=installed)
        )
        if gpus is None:
            edits.errors.setdefault("budgets", {})[str(path)] = error
        else:
            edits.budgets[str(path)] = gpus
    return edits


def may_run_whatif(user: User) -> bool:
    """A replay costs two simulations: managers (of any node) and staff may start one."""
    return bool(
        user.is_authenticated
        and (user.is_staff or Membership.objects.filter(user=user, role=Role.MANAGER).exists())
    )


def whatif_runs_visible(user: User) -> QuerySet[WhatIfRun]:
    """The one scope of what-if runs: staff see all, others their own, anonymous none."""
    runs = WhatIfRun.objects.select_related("cluster")
    if not user.is_authenticated:
        return runs.none()
    return runs if user.is_staff else runs.filter(requested_by=user)


def whatif_run_for_user(*, user: User, run_id: int) -> WhatIfRun:
    """404 for a run the user may not see (as for one that does not exist); stale runs fail here."""
    try:
        run = whatif_runs_visible(user).get(pk=run_id)
    except WhatIfRun.DoesNotExist:
        raise Http404("No such what-if run.") from None
    if run.status in ACTIVE and whatif_expire_stale(now=timezone.now()):
        run.refresh_from_db()
    return run


def whatif_expire_stale(*, now: datetime) -> int:
    """Runs queued or running for longer than WHATIF_STALE_S become failed (no worker, or it died)."""
    cutoff = now - timedelta(seconds=settings.WHATIF_STALE_S)
    return WhatIfRun.objects.filter(status__in=ACTIVE, created_at__lt=cutoff).update(
        status=WhatIfStatus.FAILED,
        error=f"No worker finished this replay within {settings.WHATIF_STALE_S // 60} minutes; try again.",
    )


def whatif_start(*, cluster: Cluster, user: User, budgets: dict[str, float], days: int) -> WhatIfRun:
    """Create a queued run and queue its task on commit.

    PermissionDenied unless :func:`may_run_whatif`; WhatIfRefused when the user already has a run
    queued or running, or the site has WHATIF_MAX_ACTIVE. The claim is made under a lock on the
    user's row, so two requests of one user cannot both pass the check.
    """
    if not isinstance(user, AuthUser) or not may_run_whatif(user):
        raise PermissionDenied("Only managers and on-call staff may run a what-if.")
    from budgets.tasks import whatif_run

    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        whatif_expire_stale(now=timezone.now())
        active = WhatIfRun.objects.filter(status__in=ACTIVE)
        if active.filter(requested_by=user).exists():
            raise WhatIfRefused("You already have a what-if running; wait for it to finish.")
        if active.count() >= settings.WHATIF_MAX_ACTIVE:
            raise WhatIfRefused(
                f"{settings.WHATIF_MAX_ACTIVE} what-ifs are already running on this site; try again shortly."
            )
        run = WhatIfRun.objects.create(cluster=cluster, requested_by=user, budgets=budgets, days=days)
        transaction.on_commit(lambda: whatif_run.apply_async(args=[run.pk], queue=settings.WHATIF_QUEUE))
    return run


def whatif_execute(run_id: int) -> None:
    """Run both simulations and store the comparison; a failure ends up on the row (the page says so).

    Only a queued run is claimed (a conditional UPDATE), so a task delivered twice runs once.
    """
    claimed = WhatIfRun.objects.filter(pk=run_id, status=WhatIfStatus.QUEUED).update(
        status=WhatIfStatus.RUNNING, progress=0.0
    )
    if not claimed:
        return
    try:
        run = WhatIfRun.objects.select_related("cluster").get(pk=run_id)
        result = whatif_compare(run=run, now=timezone.now())
        WhatIfRun.objects.filter(pk=run_id).update(result=result, status=WhatIfStatus.DONE, progress=1.0)
    except Exception as error:  # the page must say it failed, not poll for ever
        logger.exception("what-if %s failed", run_id)
        WhatIfRun.objects.filter(pk=run_id).update(
            status=WhatIfStatus.FAILED, error=f"{type(error).__name__}: {error}"[:2000]
        )


def whatif_compare(*, run: WhatIfRun, now: datetime) -> dict:
    current = current_budgets(cluster=run.cluster)
    edited = {**current, **run.budgets}
    config = policy_config(
        "fairshare", window_s=run.cluster.window_days * 86400.0, **goodput_fields(run.cluster)
    )  # the rules of issue 17 as the cluster sets them

    def report(offset: float):  # noqa: ANN202
        return lambda fraction: WhatIfRun.objects.filter(pk=run.pk).update(progress=offset + fraction / 2)

    replay = replay_build(cluster=run.cluster, budgets=current, now=now, days=run.days)
    sides = []
    for offset, budgets in ((0.0, current), (0.5, edited)):  # the same jobs, other budgets
        inputs = dataclasses.replace(replay.inputs, tree=budget_specs(budgets))
        sides.append(run_simulation(inputs, config=config, progress=report(offset),
                                    pass_interval_s=float(run.cluster.pass_interval_s)))  # fmt: skip
    before, after = sides
    result = compare_results(before.per_team, after.per_team, current=current, edited=edited)
    result["waits"] = compare_waits(before, after)
    result["replayed"] = {"recorded": replay.recorded, "synthesized": replay.synthesized}
    return result


def _recorded_by_kind(side: SimulationResult) -> dict[str, dict[str, Any]]:
    """The summary's per-class table (``by_kind``) without the synthesized workloads."""
    by_kind = side.summary.get("by_kind")
    table = by_kind if isinstance(by_kind, dict) else {}
    return {k: v for k, v in table.items() if k != SYNTHETIC_KIND}


def compare_waits(before: SimulationResult, after: SimulationResult) -> list[dict]:
    """Per workload class (recorded workloads only): jobs and wait p50 / p90 before and after."""
    tables = [_recorded_by_kind(side) for side in (before, after)]
    rows = []
    for name in sorted(set(tables[0]) | set(tables[1])):
        b, a = tables[0].get(name, {}), tables[1].get(name, {})
        rows.append({"workload_class": name, "jobs": b.get("jobs") or a.get("jobs") or 0,
                     "before_p50_s": b.get("wait_p50_s"), "before_p90_s": b.get("wait_p90_s"),
                     "after_p50_s": a.get("wait_p50_s"), "after_p90_s": a.get("wait_p90_s")})  # fmt: skip
    return rows


def compare_results(
    before: list[dict], after: list[dict], *, current: dict[str, float], edited: dict[str, float]
) -> dict:
    """Per allocation: budget, delivered and owed GPU-hours and their ratio, before and after; those
    whose budget or an ancestor's budget changed come first (``changed``). A side on which the
    allocation was owed nothing (e.g. a 0-GPU budget) reads as 0 GPU-hours and no ratio."""
    by_path: dict[str, dict] = {}
    for side, rows in (("before", before), ("after", after)):
        for row in rows:
            entry = by_path.setdefault(row["allocation"], _empty_entry(row["allocation"]))
            entry[f"{side}_ratio"] = row["delivered_owed_ratio"]
            entry[f"{side}_delivered_gpu_h"] = row["delivered_gpu_hours"]
            entry[f"{side}_owed_gpu_h"] = row["owed_gpu_hours"]
    changed = sorted(p for p in edited if edited[p] != current.get(p, 0.0))
    for path in changed:  # an edited leaf is shown even when it was owed nothing either way
        if path not in by_path and not any(other.startswith(path + "/") for other in by_path):
            by_path[path] = _empty_entry(path)
    for path, entry in by_path.items():
        entry["budget_before"] = current.get(path, 0.0)
        entry["budget_after"] = edited.get(path, 0.0)
        entry["changed"] = any(in_subtree(path, c) for c in changed)  # itself or under an edit
    rows = sorted(by_path.values(), key=lambda e: (not e["changed"], e["allocation"]))
    edits = [{"path": p, "before": current.get(p, 0.0), "after": edited[p]} for p in changed]
    totals = {
        key: round(sum(row[key] for row in rows), 1)
        for key in (
            "before_delivered_gpu_h",
            "before_owed_gpu_h",
            "after_delivered_gpu_h",
            "after_owed_gpu_h",
        )
    }
    return {"rows": rows, "edited": changed, "edits": edits, "totals": totals}


def _empty_entry(path: str) -> dict:
    return {"allocation": path, "before_ratio": None, "after_ratio": None,
            "before_delivered_gpu_h": 0.0, "before_owed_gpu_h": 0.0,
            "after_delivered_gpu_h": 0.0, "after_owed_gpu_h": 0.0}  # fmt: skip


def current_budgets(*, cluster: Cluster) -> dict[str, float]:
    return {
        path: float(gpus)
        for path, gpus in Allocation.objects.filter(cluster=cluster).values_list("node__path", "gpus")
    }
