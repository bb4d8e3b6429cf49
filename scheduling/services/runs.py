"""Run services: open a run when a workload starts, close it when it stops. Idempotent by attempt.

Opening a run records a "started" event, closing one preempted a "preempted" event (notifications),
in the caller's transaction; the pass fans its events out once, after it commits.
"""

from __future__ import annotations

from datetime import datetime

from notifications.models import EventKind
from notifications.services import event_record
from scheduling.accounting import charge_until_watermark
from scheduling.models import EndReason, Run, Workload


def run_open(
    *,
    workload: Workload,
    attempt: int,
    placement: list[list],
    started_at: datetime,
    protected_until: datetime,
    funded: bool,
) -> tuple[Run, bool]:
    """Open the run for (workload, attempt) unless it exists; returns (run, created).

    The wait before it is measured from the workload's ``queued_at`` (submit or last requeue).
    """
    run, created = Run.objects.get_or_create(
        workload=workload,
        attempt=attempt,
        defaults={
            "cluster_id": workload.cluster_id,
            "allocation_id": workload.allocation_id,
            "user_name": workload.user_name,
            "gpus": workload.gpus,
            "placement": placement,
            "funded": funded,
            "started_at": started_at,
            "protected_until": protected_until,
            "wait_s": max((started_at - workload.queued_at).total_seconds(), 0.0),
        },
    )
    if created:
        charge_until_watermark(run=run, since=started_at, sign=1.0)
        event_record(kind=EventKind.STARTED, key=f"started:{workload.pk}:{attempt}", now=started_at,
                     cluster_id=workload.cluster_id, workload_id=workload.pk, params={"attempt": attempt, "run_id": run.pk}, queue=False)  # fmt: skip
    return run, created


def run_close(*, run: Run, ended_at: datetime, reason: str) -> bool:
    """Close an open run; returns False when it was already closed (so a repeat is harmless)."""
    if run.ended_at is not None:
        return False
    ended_at = max(ended_at, run.started_at)
    run.ended_at = ended_at
    run.end_reason = reason
    run.save(update_fields=["ended_at", "end_reason"])
    charge_until_watermark(run=run, since=ended_at, sign=-1.0)
    if reason == EndReason.PREEMPTED:
        event_record(kind=EventKind.PREEMPTED, key=f"preempted:{run.workload_id}:{run.attempt}", now=ended_at,
                     cluster_id=run.cluster_id, workload_id=run.workload_id, params={"run_id": run.pk}, queue=False)  # fmt: skip
    return True
