"""After the pass: tell each waiting job, in the backend's own tools, why it waits (issue 18).

The pending reason's code, its sentence, the queue position, the estimated start and the portal
URL of the workload become one short note per job. Slurm shows it as the job's AdminComment
(`squeue -O JobID,UserName,Reason,AdminComment`, `scontrol show job`, `sacct -o AdminComment`);
Kubernetes as a condition and an Event on the Job. A backend without ``annotate`` is skipped.
Writing notes never fails the pass: a failure is logged and the next pass writes them again
(the backend compares with what the job already says, so an unchanged note costs nothing).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.urls import reverse

from portal.links import absolute_url
from scheduling.backends.base import Backend
from scheduling.models import Cluster, PendingReason, WorkloadState

logger = logging.getLogger(__name__)
NOTES_PER_PASS = 500  # the longest waiting first; the rest follow in later passes


def workload_url(workload_id: int) -> str:
    """The workload's page in the portal, absolute (settings.PORTAL_URL)."""
    return absolute_url(reverse("scheduling:workload", kwargs={"workload_id": workload_id}))


def pending_note(*, code: str, message: str, position: int | None, estimated_start: datetime | None,
                 url: str) -> str:  # fmt: skip
    """ "FAIR_SHARE #3 ~14:05 UTC: <sentence> <url>" (position and estimate only when known)."""
    parts = [code]
    if position is not None:
        parts.append(f"#{position}")
    if estimated_start is not None:
        parts.append(f"~{estimated_start.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
    return f"{' '.join(parts)}: {message} {url}"


def backend_notes_write(*, cluster: Cluster, backend: Backend) -> int:
    """Write the current pending reason of every waiting workload into its job; returns how many
    jobs the backend changed."""
    annotate = getattr(backend, "annotate", None)
    if annotate is None:
        return 0
    rows = (
        PendingReason.objects.filter(workload__cluster=cluster, workload__state=WorkloadState.PENDING)
        .exclude(workload__backend_ref="")
        .order_by("position", "workload_id")
        .values_list("workload_id", "workload__backend_ref", "code", "message", "position", "estimated_start")
    )[:NOTES_PER_PASS]
    notes = {
        ref: pending_note(
            code=code,
            message=message,
            position=position,
            estimated_start=estimate,
            url=workload_url(workload_id),
        )  # fmt: skip
        for workload_id, ref, code, message, position, estimate in rows
    }
    try:
        return annotate(notes)
    except Exception:  # noqa: BLE001 - notes are for people; the pass's decisions are already made
        logger.exception("writing pending reasons into cluster %s's jobs failed", cluster.slug)
        return 0
