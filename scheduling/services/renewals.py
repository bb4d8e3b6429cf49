"""Renewing an interactive session's protection (issue 17 point 4; docs/policy.md "Interactive
sessions").

A busy interactive session whose minimum-runtime protection is ending may renew it: its open run's
``protected_until`` becomes now + the cluster's minimum-runtime cap (never past the end its declared
maximum runtime allows), at most ``Cluster.session_renewals_per_day`` times in any 24 hours. Each
refusal names the field it is about, so the API answers 400 with it and the page shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scheduling.models import ProtectionRenewal, Run, Workload, WorkloadClass, WorkloadState
from scheduling.sessions import (
    IDLE_BELOW_PCT,
    IDLE_WINDOW,
    RENEWAL_PERIOD,
    is_idle,
    mean_busy,
    renewals_in_period,
    renewals_left,
)


class RenewalRefused(ValueError):
    """A renewal that the rules refuse; ``errors`` maps a field name to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(" ".join(message for messages in errors.values() for message in messages))
        self.errors = errors


@dataclass(frozen=True)
class Renewed:
    workload: Workload
    protected_until: datetime
    renewals_left: int


def renewal_until(*, run: Run, workload: Workload, now: datetime) -> datetime:
    """The new end of protection: now + the cluster's minimum-runtime cap, never past the end of
    the declared maximum runtime, never earlier than the current end."""
    until = now + timedelta(seconds=workload.cluster.min_runtime_cap_s)
    if workload.max_runtime_s:
        until = min(until, run.started_at + timedelta(seconds=workload.max_runtime_s))
    return max(until, run.protected_until)


def renewal_refusals(*, workload: Workload, run: Run | None, now: datetime) -> dict[str, list[str]]:
    """Why the workload may not renew its protection now (empty: it may). In order: a running
    interactive session, charged to a funded allocation (unfunded work is never protected), not
    idle (busy under 10% over the last 30 minutes), under the cluster's daily limit, and a renewal
    that would extend its protection at all."""
    if workload.state != WorkloadState.RUNNING or run is None:
        return {
            "state": [
                f"Only a running session can renew its protection; workload {workload.pk} is {workload.state}."
            ]
        }
    if workload.workload_class != WorkloadClass.INTERACTIVE:
        return {
            "workload_class": [
                f"Only interactive sessions can renew their protection; workload {workload.pk} is {workload.workload_class}."
            ]
        }
    if not run.funded:
        return {
            "allocation": [
                "Unfunded work is never protected, so there is nothing to renew: charge it to a funded allocation."
            ]
        }
    busy, samples = mean_busy(workload_ids=[workload.pk], now=now).get(workload.pk, (None, 0))
    if is_idle(busy_pct=busy, samples=samples, started_at=run.started_at, now=now):
        minutes = int(IDLE_WINDOW.total_seconds() // 60)
        return {
            "utilisation": [
                f"The session is idle: its GPUs were {busy:.0f}% busy over the last {minutes} minutes (under {IDLE_BELOW_PCT:.0f}%). Only a busy session can renew its protection."
            ]
        }
    limit = workload.cluster.session_renewals_per_day
    used = renewals_in_period(workload_id=workload.pk, now=now)
    if len(used) >= limit:
        if limit == 0:
            return {"renewals": [f"Sessions cannot renew their protection on {workload.cluster.name}."]}
        again = used[len(used) - limit] + RENEWAL_PERIOD
        return {
            "renewals": [
                f"Already renewed {len(used)} times in the last 24 hours, the limit on {workload.cluster.name}; the next renewal is possible at {again:%Y-%m-%d %H:%M} UTC."
            ]
        }
    if renewal_until(run=run, workload=workload, now=now) <= run.protected_until:
        return {
            "protected_until": [
                f"Already protected until {run.protected_until:%Y-%m-%d %H:%M} UTC, as long as a renewal now would give (its declared maximum runtime or the cluster's cap)."
            ]
        }
    return {}  # fmt: skip


@transaction.atomic
def workload_renew_protection(*, workload: Workload, actor, now: datetime | None = None) -> Renewed:  # noqa: ANN001
    """Renew a busy interactive session's protection (see the module docstring); raises
    RenewalRefused with the field-level reasons otherwise."""
    now = now or timezone.now()
    workload = Workload.objects.select_for_update().select_related("cluster").get(pk=workload.pk)
    run = Run.objects.select_for_update().filter(workload=workload, ended_at__isnull=True).first()
    refusals = renewal_refusals(workload=workload, run=run, now=now)
    if refusals:
        raise RenewalRefused(refusals)
    assert run is not None  # renewal_refusals refuses a workload without an open run
    until = renewal_until(run=run, workload=workload, now=now)
    ProtectionRenewal.objects.create(
        workload=workload, run=run, at=now, actor=(getattr(actor, "username", "") or "")[:150],
        protected_before=run.protected_until, protected_until=until,
    )  # fmt: skip
    run.protected_until = until
    run.save(update_fields=["protected_until"])
    return Renewed(
        workload=workload, protected_until=until, renewals_left=renewals_left(workload=workload, now=now)
    )
