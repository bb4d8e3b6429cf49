"""History retention: raw rows the rollups have folded are dropped once they are old.

Every pass writes a ``SchedulingPass`` row (one per cluster every 10 s: ~8,600 a day) and every
reconcile writes ``UtilisationSample`` rows; the pages read the hourly rollups instead, so past a
retention period those rows only cost space. ``history_prune`` deletes, per cluster:

- passes that started before the cutoff, made no decision (a pass with decisions is part of some
  workload's history and is kept with them), are finished and already folded into the rollups,
  never the cluster's two latest passes (a running pass reads the one before it);
- utilisation samples taken before the cutoff and already folded into the rollups.

Workloads, runs, decisions and the rollups themselves are never deleted here. Rows are deleted in
batches so a large backlog never holds long locks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef, QuerySet

from portal.models import RollupWatermark
from scheduling.models import Cluster, Decision, SchedulingPass, UtilisationSample

BATCH = 5_000


@dataclass(frozen=True)
class Pruned:
    cluster: str
    passes: int
    samples: int


def history_prune(
    *,
    now: datetime,
    keep_days: int,
    dry_run: bool = False,
    progress: Callable[[Pruned], None] | None = None,
) -> list[Pruned]:
    """Delete (or, with ``dry_run``, count) the rows described above; one :class:`Pruned` per cluster."""
    if keep_days < 1:
        raise ValueError(f"keep_days must be at least 1, got {keep_days}")
    cutoff = now - timedelta(days=keep_days)
    results = []
    for cluster in Cluster.objects.order_by("slug"):
        mark = RollupWatermark.objects.filter(cluster=cluster).first()
        if mark is None:  # nothing folded yet: every row may still be needed
            result = Pruned(cluster.slug, 0, 0)
        else:
            passes = _old_passes(cluster, cutoff, mark.last_pass_id)
            samples = UtilisationSample.objects.filter(
                cluster=cluster, at__lt=cutoff, pk__lte=mark.last_utilisation_id
            )
            if dry_run:
                result = Pruned(cluster.slug, passes.count(), samples.count())
            else:
                result = Pruned(cluster.slug, _delete_in_batches(passes), _delete_in_batches(samples))
        results.append(result)
        if progress:
            progress(result)
    return results


def _old_passes(cluster: Cluster, cutoff: datetime, folded_up_to: int) -> QuerySet:
    latest = list(
        SchedulingPass.objects.filter(cluster=cluster).order_by("-pk").values_list("pk", flat=True)[:2]
    )
    return (
        SchedulingPass.objects.filter(
            cluster=cluster, started_at__lt=cutoff, finished_at__isnull=False, pk__lte=folded_up_to
        )
        .exclude(pk__in=latest)
        .exclude(Exists(Decision.objects.filter(scheduling_pass=OuterRef("pk"))))
    )


def _delete_in_batches(queryset: QuerySet) -> int:
    deleted = 0
    while True:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:BATCH])
        if not ids:
            return deleted
        queryset.model.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
