"""The Slurm account mirror as a job of its own (issue 18): run by a Celery task, never by a pass.

Beat queues ``scheduling.mirror_slurm_accounts`` for every Slurm cluster every
SLURM_MIRROR_INTERVAL_S seconds, and a change to the budget tree (a node, an allocation, a
membership) queues it at once when the change commits. Unchanged trees cost a digest comparison.
"""

from __future__ import annotations

import logging

from scheduling.models import BackendKind, Cluster

logger = logging.getLogger(__name__)


def slurm_clusters() -> list[int]:
    return list(
        Cluster.objects.filter(backend_kind=BackendKind.SLURM).order_by("id").values_list("id", flat=True)
    )


def slurm_mirror_run(*, cluster_id: int) -> str:
    """Mirror one cluster; "unchanged", "mirrored" or "failed" (logged; the next run tries again)."""
    from scheduling.backends.slurm_accounts import slurm_accounts_sync

    cluster = Cluster.objects.get(pk=cluster_id)
    try:
        report = slurm_accounts_sync(cluster=cluster)
    except Exception:  # any Slurm or sacctmgr failure: the digest is not stored, so it is retried
        logger.exception("mirroring the budget tree into Slurm accounts failed for cluster %s", cluster.slug)
        return "failed"
    if report is None:
        return "unchanged"
    logger.info("Slurm accounts of cluster %s mirrored: %s", cluster.slug, report)
    return "mirrored"


def slurm_mirror_request() -> None:
    """Queue a mirror of every Slurm cluster once the current transaction commits."""
    from django.db import transaction

    def enqueue() -> None:
        from scheduling.tasks import mirror_slurm_accounts

        for cluster_id in slurm_clusters():  # none on most sites: then nothing is queued
            try:
                mirror_slurm_accounts.apply_async(args=[cluster_id], expires=60)
            except Exception:  # noqa: BLE001 - broker down: beat's next tick queues it anyway
                logger.warning("could not queue the Slurm account mirror of cluster %s", cluster_id)

    transaction.on_commit(enqueue)
