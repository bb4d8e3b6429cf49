"""Celery entry points of budgets: thin, id in, call the service."""

from __future__ import annotations

from celery import shared_task

from budgets.whatif import whatif_execute


@shared_task(name="budgets.whatif_run", ignore_result=True, acks_late=False)
def whatif_run(run_id: int) -> None:
    """Replay one what-if; its outcome (or its error) is written to the ``WhatIfRun`` row.

    Acknowledged on receipt: a replay that killed its worker is not redelivered for ever; the run is
    marked failed when it goes stale (``budgets.whatif.whatif_expire_stale``)."""
    whatif_execute(run_id)
