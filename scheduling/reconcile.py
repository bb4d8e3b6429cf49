"""Phase 1 of the pass: make the database agree with what the backend reports.

The backend is the source of truth for what runs (DESIGN 3). For each observed job we open the run
it started, close the run it ended, requeue or end its workload, and adopt jobs submitted natively.
Every rule is idempotent: observing the same state twice changes nothing the second time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet

from scheduling.accounting import accounting_charge_usage, lease_for
from scheduling.backends.base import ClusterState, JobState, ObservedJob, ObservedNode
from scheduling.bulk import fetch_rows, insert_rows, update_rows
from scheduling.models import (
    TERMINAL_STATES,
    Cluster,
    Decision,
    DecisionKind,
    EndReason,
    Node,
    PassLease,
    Run,
    UtilisationSample,
    Workload,
    WorkloadState,
)
from scheduling.services.runs import run_close, run_open
from scheduling.services.workloads import (
    BACKEND_HOLD_NOTE,
    workload_adopt,
    workload_follow_backend_hold,
    workload_transition,
)

logger = logging.getLogger(__name__)
SAMPLE_EVERY = timedelta(seconds=30)

END_REASONS = {
    JobState.COMPLETED: EndReason.COMPLETED,
    JobState.FAILED: EndReason.FAILED,
    JobState.CANCELLED: EndReason.CANCELLED,
    JobState.NODE_FAILURE: EndReason.NODE_FAILURE,
}


@dataclass
class ReconcileCounts:
    runs_opened: int = 0
    runs_closed: int = 0
    adopted: int = 0
    skipped: list[str] = field(default_factory=list)  # "job <ref>: <error>" for each job left alone

    def skip(self, ref: str, error: object) -> None:
        logger.warning("reconcile skipped job %s: %s", ref, error)
        self.skipped.append(f"job {ref}: {error}")


def at(seconds: float | None, default: datetime) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds is not None else default


def protected_until(*, workload: Workload, started_at: datetime, funded: bool) -> datetime:
    """start + min(minimum runtime, cap) for funded work; unfunded work is never protected."""
    if not funded:
        return started_at
    return started_at + timedelta(seconds=min(workload.min_runtime_s, workload.cluster.min_runtime_cap_s))


@transaction.atomic
def reconcile(
    *, cluster: Cluster, state: ClusterState, now: datetime, funded_ids: set[int]
) -> ReconcileCounts:
    """Apply the observed state. ``funded_ids``: allocation ids with a budget > 0 on this cluster.

    Jobs whose workload already agrees with them (the common case) are settled from plain tuples;
    model rows are loaded only for the few that need a change.
    """
    counts = ReconcileCounts()
    for unreadable in state.unreadable:
        counts.skip(unreadable.ref, unreadable.error)
    Decision.objects.filter(
        cluster=cluster, dispatched_at__isnull=True, superseded=False,
        kind__in=[DecisionKind.START, DecisionKind.PREEMPT],
    ).update(superseded=True)  # fmt: skip
    nodes_sync(cluster=cluster, observed=state.nodes)
    known = _known_workloads(cluster=cluster, jobs=state.jobs, now=now, counts=counts)
    open_attempts = dict(
        Run.objects.filter(cluster=cluster, ended_at__isnull=True).values_list("workload_id", "attempt")
    )
    lookups = [(job, workload_of(job, known)) for job in state.jobs]
    matched = [(job, light) for job, light in lookups if light is not None]
    to_sync = [
        (job, light.id) for job, light in matched if not _settled(job, light, open_attempts.get(light.id))
    ]
    unreadable_refs = {job.ref for job in state.unreadable}
    vanished = sorted(
        open_attempts.keys()
        - {light.id for _, light in matched}
        - {light.id for ref, light in known.items() if ref in unreadable_refs}
    )
    workloads = Workload.objects.select_related("cluster").in_bulk([wid for _, wid in to_sync] + vanished)
    runs = {
        run.workload_id: run
        for run in Run.objects.filter(workload_id__in=list(workloads), ended_at__isnull=True)
    }
    for job, wid in to_sync:
        try:
            with transaction.atomic():  # one odd job must not stop the whole cluster's pass
                _sync(workloads[wid], job, runs.get(wid), now=now, funded_ids=funded_ids, counts=counts)
        except Exception as error:  # noqa: BLE001 - any failure stays with its job; the pass goes on
            counts.skip(job.ref, f"{type(error).__name__}: {error}")
    _save_found_references(matched)
    _follow_backend_holds(cluster=cluster, matched=matched, now=now)
    for wid in vanished:
        _close_vanished(workloads[wid], runs.get(wid), now=now, counts=counts)
    _sample_utilisation(cluster=cluster, matched=matched, now=now)
    accounting_charge_usage(cluster_id=cluster.pk, now=now)
    return counts


@dataclass(frozen=True, slots=True)
class Known:
    """What reconcile needs to know about a workload to see that nothing changed."""

    id: int
    ref: str
    state: str
    attempt: int
    gpus: int


def workload_of(job: ObservedJob, known: dict[int | str, Known]) -> Known | None:
    """The workload a backend job belongs to: the one whose backend job it is; else the one it
    names (the portal's submit writes the workload id on its job) if that workload has no backend job
    yet and the job still waits or runs (the portal stopped between submitting and saving the
    reference). A job naming a workload whose backend job is another one is not that workload's: an
    ended job left over from another portal database, or a user's `--comment=workload=7`, must
    never end, start or take over somebody else's workload."""
    own = known.get(job.ref)
    if own is not None:
        return own
    named = known.get(job.workload_id) if job.workload_id is not None else None
    live = job.state in (JobState.WAITING, JobState.RUNNING)
    return named if named is not None and not named.ref and live else None


def _settled(job: ObservedJob, workload: Known, open_attempt: int | None) -> bool:
    """True when the workload already agrees with the observed job (nothing to do)."""
    if workload.state in TERMINAL_STATES:
        return job.state != JobState.RUNNING
    if job.state == JobState.RUNNING:
        return (
            workload.state == WorkloadState.RUNNING
            and open_attempt is not None
            and job.attempt in (0, open_attempt)
        )
    if workload.state != WorkloadState.PENDING or open_attempt is not None:
        return False
    stale_failure = job.state == JobState.NODE_FAILURE and 0 < job.attempt <= workload.attempt
    return job.state == JobState.WAITING or stale_failure


NODE_FIELDS = ("gpus", "gpu_type", "topology_domain", "healthy")


def nodes_sync(*, cluster: Cluster, observed: tuple[ObservedNode, ...]) -> None:
    """Upsert Node rows from the backend; nodes it no longer reports are marked unhealthy."""
    existing = {
        name: (pk, values)
        for pk, name, *values in Node.objects.filter(cluster=cluster).values_list("pk", "name", *NODE_FIELDS)
    }
    changed, created = [], []
    for seen in observed:
        values = [seen.gpus, seen.gpu_type, seen.domain, seen.healthy]
        pk, stored = existing.pop(seen.name, (None, None))
        if pk is None:
            created.append(
                Node(cluster=cluster, name=seen.name, **dict(zip(NODE_FIELDS, values, strict=True)))
            )
        elif stored != values:
            changed.append(
                Node(pk=pk, cluster=cluster, name=seen.name, **dict(zip(NODE_FIELDS, values, strict=True)))
            )
    for name, (pk, (gpus, gpu_type, domain, healthy)) in existing.items():
        if healthy:
            changed.append(Node(pk=pk, cluster=cluster, name=name, gpus=gpus, gpu_type=gpu_type,
                                topology_domain=domain, healthy=False))  # fmt: skip
    Node.objects.bulk_create(created)
    update_rows(Node, changed, list(NODE_FIELDS))


def _known_workloads(
    *, cluster: Cluster, jobs: tuple[ObservedJob, ...], now: datetime, counts: ReconcileCounts
) -> dict[int | str, Known]:
    """Workloads the observed jobs belong to (and all running ones), by id and by backend ref.

    Natively submitted jobs nobody knows yet are adopted here.
    """
    ids = {job.workload_id for job in jobs if job.workload_id is not None}
    # Indexed reads rather than one OR that the database answers with a table scan: the workloads
    # the jobs name and the running ones, then by backend ref the jobs not found as their own
    # (natively submitted ones, and any naming a workload whose job is another).
    in_cluster = Workload.objects.filter(cluster=cluster)
    found: dict[int | str, Known] = {}
    _remember(found, in_cluster.filter(pk__in=ids), in_cluster.filter(state=WorkloadState.RUNNING))
    _remember(found, in_cluster.filter(backend_ref__in={job.ref for job in jobs if job.ref not in found}))
    for job in jobs:
        if workload_of(job, found) is None and _adoptable(job):
            try:
                with transaction.atomic():  # a job we cannot adopt is skipped, never the pass
                    workload = workload_adopt(cluster=cluster, job=job, now=now)
            except Exception as error:  # noqa: BLE001 - recorded on the pass with the job's ref
                counts.skip(job.ref, f"not adopted: {type(error).__name__}: {error}")
                continue
            known = Known(workload.pk, workload.backend_ref, workload.state, workload.attempt, workload.gpus)
            found[known.id] = found[job.ref] = known
            counts.adopted += 1
    return found


def _remember(found: dict[int | str, Known], *querysets: QuerySet[Workload]) -> None:
    """Add the workloads of ``querysets`` to ``found``, by id and by backend ref."""
    for queryset in querysets:
        for row in fetch_rows(queryset.values_list("id", "backend_ref", "state", "attempt", "gpus")):
            known = Known(*row)
            found[known.id] = known
            if known.ref:
                found[known.ref] = known


def _save_found_references(matched: list[tuple[ObservedJob, Known]]) -> None:
    """A workload found by the id its job carries (the portal stopped between submitting the job
    and saving its reference) gets that job's reference, so the next submit does not create a
    second job for it and actions reach the job that exists."""
    for job, known in matched:
        if not known.ref:
            Workload.objects.filter(pk=known.id, backend_ref="").update(backend_ref=job.ref)


def _follow_backend_holds(
    *, cluster: Cluster, matched: list[tuple[ObservedJob, Known]], now: datetime
) -> None:
    """A hold set or lifted in the backend (a user's `scontrol hold`) becomes or stops being the
    pending workload's hold; the pass never releases such a job itself. Two small reads: the jobs
    the backend reports held, and the workloads held because the backend said so."""
    jobs = {known.id: job for job, known in matched}
    held = [wid for wid, job in jobs.items() if job.held_by and job.state == JobState.WAITING]
    pending = Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING)
    to_hold = set(pending.filter(pk__in=held, held=False).values_list("pk", flat=True))
    backend_held = pending.filter(held=True, held_note=BACKEND_HOLD_NOTE).values_list("pk", flat=True)
    to_lift = {wid for wid in backend_held if wid in jobs and not jobs[wid].held_by}
    for workload in pending.filter(pk__in=sorted(to_hold | to_lift)).order_by("pk"):
        workload_follow_backend_hold(workload=workload, job=jobs[workload.pk], now=now)


def _adoptable(job: ObservedJob) -> bool:
    return job.state in (JobState.WAITING, JobState.RUNNING) and job.gpus > 0


def _sync(
    workload: Workload,
    job: ObservedJob,
    run: Run | None,
    *,
    now: datetime,
    funded_ids: set[int],
    counts: ReconcileCounts,
) -> None:
    if workload.state in TERMINAL_STATES:
        if job.state == JobState.RUNNING:
            _queue_cancel(
                workload, now=now, reason=f"the workload is {workload.state} but its job still runs"
            )
        return
    attempt = job.attempt or (run.attempt if run else workload.attempt + 1)
    if job.state == JobState.RUNNING:
        _observed_running(workload, job, run, attempt=attempt, now=now, funded_ids=funded_ids, counts=counts)
    elif job.state == JobState.WAITING:
        if run is not None:
            _end_run(workload, run, reason=EndReason.PREEMPTED, ended_at=now, counts=counts)
            workload_transition(workload=workload, to=WorkloadState.PENDING, now=now)
    else:
        _observed_ended(workload, job, run, attempt=attempt, now=now, funded_ids=funded_ids, counts=counts)


def _observed_running(
    workload: Workload,
    job: ObservedJob,
    run: Run | None,
    *,
    attempt: int,
    now: datetime,
    funded_ids: set[int],
    counts: ReconcileCounts,
) -> None:
    if run is not None and run.attempt == attempt:
        return
    if run is not None:
        _end_run(workload, run, reason=EndReason.PREEMPTED, ended_at=now, counts=counts)
    else:
        workload_transition(workload=workload, to=WorkloadState.RUNNING, now=now, save=False)
    _start_run(workload, job, attempt=attempt, now=now, funded_ids=funded_ids, counts=counts)


def _start_run(
    workload: Workload,
    job: ObservedJob,
    *,
    attempt: int,
    now: datetime,
    funded_ids: set[int],
    counts: ReconcileCounts,
) -> Run:
    started_at = min(at(job.started_at, now), now)
    funded = workload.allocation_id in funded_ids
    workload.attempt = max(workload.attempt, attempt)
    workload.save()
    run, created = run_open(
        workload=workload,
        attempt=attempt,
        placement=[[node, 0] for node in job.nodes],
        started_at=started_at,
        protected_until=protected_until(workload=workload, started_at=started_at, funded=funded),
        funded=funded,
    )
    counts.runs_opened += int(created)
    return run


def _observed_ended(
    workload: Workload,
    job: ObservedJob,
    run: Run | None,
    *,
    attempt: int,
    now: datetime,
    funded_ids: set[int],
    counts: ReconcileCounts,
) -> None:
    if run is None:
        if (
            Run.objects.filter(workload=workload, attempt=attempt).exists()
            or job.state == JobState.NODE_FAILURE
        ):
            return  # an end we already recorded, still reported by the backend
        if job.started_at is None:  # ended while waiting (cancelled or failed natively)
            to = WorkloadState.FAILED if job.state == JobState.FAILED else WorkloadState.CANCELLED
            workload_transition(workload=workload, to=to, now=now)
            return
        workload_transition(workload=workload, to=WorkloadState.RUNNING, now=now, save=False)
        run = _start_run(workload, job, attempt=attempt, now=now, funded_ids=funded_ids, counts=counts)
    reason = _end_reason(workload, job, attempt=attempt)
    _end_run(workload, run, reason=reason, ended_at=min(at(job.ended_at, now), now), counts=counts)
    workload_transition(workload=workload, to=_next_state(workload, reason), now=now)


def _end_reason(workload: Workload, job: ObservedJob, *, attempt: int) -> str:
    if (
        job.state == JobState.CANCELLED
        and not workload.cancel_requested_at
        and Decision.objects.filter(
            workload=workload, kind=DecisionKind.PREEMPT, attempt=attempt, requeue=False
        ).exists()
    ):
        return EndReason.PREEMPTED
    return END_REASONS[JobState(job.state)]


def _next_state(workload: Workload, reason: str) -> str:
    if reason == EndReason.NODE_FAILURE:
        return WorkloadState.PENDING if workload.resumable else WorkloadState.FAILED
    states: dict[str, WorkloadState] = {
        EndReason.COMPLETED: WorkloadState.COMPLETED,
        EndReason.FAILED: WorkloadState.FAILED,
        EndReason.CANCELLED: WorkloadState.CANCELLED,
        EndReason.PREEMPTED: WorkloadState.PREEMPTED,
    }
    return states[reason]


def _end_run(
    workload: Workload, run: Run, *, reason: str, ended_at: datetime, counts: ReconcileCounts
) -> None:
    counts.runs_closed += int(run_close(run=run, ended_at=ended_at, reason=reason))


def _close_vanished(workload: Workload, run: Run | None, *, now: datetime, counts: ReconcileCounts) -> None:
    """A running workload whose job the backend no longer reports at all has failed (it was lost)."""
    if run is not None:
        _end_run(workload, run, reason=EndReason.FAILED, ended_at=now, counts=counts)
    if workload.state == WorkloadState.RUNNING:
        workload_transition(workload=workload, to=WorkloadState.FAILED, now=now)


def _queue_cancel(workload: Workload, *, now: datetime, reason: str) -> None:
    if not Decision.objects.filter(
        workload=workload, kind=DecisionKind.CANCEL, dispatched_at__isnull=True
    ).exists():
        Decision.objects.create(
            cluster_id=workload.cluster_id,
            workload=workload,
            kind=DecisionKind.CANCEL,
            attempt=workload.attempt,
            reason=reason,
            created_at=now,
        )


def _sample_utilisation(*, cluster: Cluster, matched: list[tuple[ObservedJob, Known]], now: datetime) -> None:
    """One utilisation sample per running workload per SAMPLE_EVERY (throttled per cluster)."""
    lease = lease_for(cluster.pk)
    if lease.last_sample_at and now - lease.last_sample_at < SAMPLE_EVERY:
        return
    samples = [
        UtilisationSample(workload_id=known.id, cluster=cluster, at=now, gpus=known.gpus, gpu_utilisation=job.gpu_utilisation)
        for job, known in matched
        if job.state == JobState.RUNNING and job.gpu_utilisation is not None
    ]  # fmt: skip
    if samples:
        insert_rows(UtilisationSample, samples, ["workload", "cluster", "at", "gpus", "gpu_utilisation"])
        PassLease.objects.filter(pk=cluster.pk).update(last_sample_at=now)
