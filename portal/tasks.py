"""Celery entry points of the portal: thin, they call the service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from portal.retention import history_prune


@shared_task(name="portal.prune_history", ignore_result=True)
def prune_history() -> dict[str, int]:
    """Beat runs this daily: drop folded pass and utilisation rows older than HISTORY_RETENTION_DAYS."""
    pruned = history_prune(now=timezone.now(), keep_days=settings.HISTORY_RETENTION_DAYS)
    return {"passes": sum(p.passes for p in pruned), "samples": sum(p.samples for p in pruned)}
