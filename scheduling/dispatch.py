"""Phase 5 of the pass: push decisions to the backend, then record what they did.

Preemptions carry the cluster's grace period (``Cluster.preemption_grace_s``). A backend that stops
a job in two steps (``GracefulBackend``: Slurm) is sent the signal now and the decision records when
the kill or requeue is due (``Decision.grace_until``); every later pass finishes those that are due
(``preemptions_finish``) until the backend confirms (``Decision.finished_at``), so a failed kill is
retried, never forgotten. The portal records the preemption itself (run closed, workload requeued
or ended) when the signal is accepted, as before.

Order: submit workloads the backend has not seen, then preemptions (to free GPUs), starts and
cancels in one ``apply``. Only after the backend accepted them are decisions marked dispatched and
runs opened or closed; if we die in between, the next pass's reconcile reads the truth from the
backend instead. A start whose workload is no longer startable (cancelled, held) is superseded.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from notifications.models import EventKind
from notifications.services import event_record
from scheduling.backends.base import (
    Action,
    ActionsRefused,
    Backend,
    BackendUnavailable,
    CancelAction,
    GracefulBackend,
    PreemptAction,
    StartAction,
    SubmitRequest,
)
from scheduling.models import (
    Cluster,
    Decision,
    DecisionKind,
    EndReason,
    Run,
    SchedulingPass,
    Workload,
    WorkloadState,
)
from scheduling.services.runs import run_close, run_open
from scheduling.services.workloads import (
    START_REFUSALS,
    IllegalTransition,
    workload_forget_refusals,
    workload_held_record,
    workload_transition,
)
from scheduling.wording import lost_work, preemption_words

logger = logging.getLogger(__name__)
SUBMITS_PER_PASS = 500
START_REFUSALS_TO_HOLD = 3
KIND_ORDER: dict[str, int] = {DecisionKind.PREEMPT: 0, DecisionKind.START: 1, DecisionKind.CANCEL: 2}


def dispatch(*, record: SchedulingPass, cluster: Cluster, backend: Backend, now: datetime) -> None:
    submit_new(cluster=cluster, backend=backend)
    decisions = _to_dispatch(record=record, cluster=cluster)
    if not decisions:
        return
    refused: dict[int, str] = {}
    grace_s = cluster.preemption_grace_s
    lost = _lost_words(decisions, now=now)
    try:
        backend.apply(
            [_action(decision, grace_s=grace_s, lost=lost.get(decision.pk, "")) for decision in decisions]
        )
    except ActionsRefused as error:  # the rest was applied: record those, explain these
        refused = error.refused
    accepted = [d for d in decisions if d.workload_id not in refused]
    with transaction.atomic():
        Decision.objects.filter(pk__in=[d.pk for d in accepted]).update(dispatched_at=now)
        if grace_s > 0 and isinstance(backend, GracefulBackend):
            Decision.objects.filter(pk__in=[d.pk for d in accepted if d.kind == DecisionKind.PREEMPT]).update(
                grace_until=now + timedelta(seconds=grace_s)
            )
        _record_effects(accepted, now=now)
        _record_refusals([d for d in decisions if d.workload_id in refused], refused, now=now)


def preemptions_finish(*, cluster: Cluster, backend: Backend, now: datetime) -> int:
    """Kill or requeue the jobs whose preemption's grace period has passed (``GracefulBackend``);
    each decision is marked finished once the backend did it, so one it refused (or a pass that
    died first) is tried again by the next pass. A requeue whose workload left the queue meanwhile
    (its owner cancelled it: the cancel stops the job) is not sent. Returns how many were finished."""
    if not isinstance(backend, GracefulBackend):
        return 0
    due = list(
        Decision.objects.filter(
            cluster=cluster, kind=DecisionKind.PREEMPT, dispatched_at__isnull=False,
            grace_until__lte=now, finished_at__isnull=True,
        ).select_related("workload").order_by("grace_until", "id")
    )  # fmt: skip
    if not due:
        return 0
    refused: dict[int, str] = {}
    to_stop = [d for d in due if not d.requeue or d.workload.state == WorkloadState.PENDING]
    try:
        if to_stop:
            backend.finish_preemptions([_preempt_action(decision, grace_s=0) for decision in to_stop])
    except ActionsRefused as error:
        refused = error.refused
    for decision in due:
        if decision.workload_id in refused:
            logger.warning("preemption of workload %s not finished yet: %s", decision.workload_id,
                           refused[decision.workload_id])  # fmt: skip
    done = [d.pk for d in due if d.workload_id not in refused]
    Decision.objects.filter(pk__in=done).update(finished_at=now)
    return len(done)


def _record_refusals(decisions: list[Decision], refused: dict[int, str], *, now: datetime) -> None:
    """A refused start or preemption is superseded (nothing happened; reconcile reads the truth and
    the next pass plans again); a refused cancel stays queued and is sent again. A workload whose
    start the backend refused ``START_REFUSALS_TO_HOLD`` times in a row is held, with the backend's
    words as the note, so it stops taking a place in every pass and its owner sees why."""
    for decision in decisions:
        why = refused[decision.workload_id][:500]
        logger.warning("the backend refused %s of workload %s: %s", decision.kind, decision.workload_id, why)
        if decision.kind == DecisionKind.CANCEL:
            continue
        decision.superseded = True
        decision.reason = f"{decision.reason} (refused by the backend: {why})".strip()[:2000]
        decision.save(update_fields=["superseded", "reason"])
        if decision.kind == DecisionKind.START:
            _count_refused_start(decision.workload_id, why, now=now)


def _count_refused_start(workload_id: int, why: str, *, now: datetime) -> None:
    workload = Workload.objects.select_for_update().get(pk=workload_id)
    metadata = dict(workload.metadata or {})
    metadata[START_REFUSALS] = int(metadata.get(START_REFUSALS, 0)) + 1
    metadata["start_refused"] = why
    workload.metadata = metadata
    fields = ["metadata"]
    if metadata[START_REFUSALS] >= START_REFUSALS_TO_HOLD and workload.state == WorkloadState.PENDING:
        workload.held, workload.held_by, workload.held_at = True, "scheduler", now
        note = f"The backend refused to start it {metadata[START_REFUSALS]} times: {why}"
        workload.held_note = note[:500]
        fields += ["held", "held_by", "held_at", "held_note"]
    workload.save(update_fields=fields)
    if metadata[START_REFUSALS] == 1:  # the first of a streak; a third in a row holds it (told below)
        event_record(kind=EventKind.START_REFUSED, key=f"start_refused:{workload_id}:{now.isoformat()}",
                     now=now, cluster_id=workload.cluster_id, workload_id=workload_id, params={"why": why})  # fmt: skip
    if "held" in fields:
        workload_held_record(workload)


def submit_new(*, cluster: Cluster, backend: Backend) -> int:
    """Create backend jobs for workloads submitted through the API (a bounded batch per pass)."""
    fresh = list(
        Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING, backend_ref="")
        .select_related("allocation", "cluster")
        .order_by("id")[:SUBMITS_PER_PASS]
    )
    for workload in fresh:
        try:
            workload.backend_ref = backend.submit(_submit_request(workload))
        except BackendUnavailable:
            raise
        except Exception as refused:  # the backend refused this one job: fail it, keep the pass going
            logger.warning("the backend refused workload %s: %s", workload.pk, refused)
            _refused(workload, error=str(refused))
            continue
        Workload.objects.filter(pk=workload.pk, backend_ref="").update(backend_ref=workload.backend_ref)
    return len(fresh)


@transaction.atomic
def _refused(workload: Workload, *, error: str) -> None:
    workload.metadata = {**(workload.metadata or {}), "submit_error": error[:1000]}
    workload_transition(workload=workload, to=WorkloadState.FAILED, now=timezone.now())


def _submit_request(workload: Workload) -> SubmitRequest:
    return SubmitRequest(
        workload_id=workload.pk,
        account=workload.allocation_path,
        user=workload.user_name,
        gpus=workload.gpus,
        gpus_per_node=workload.gpus_per_node,
        name=workload.name or f"workload-{workload.pk}",
        min_runtime_s=float(workload.min_runtime_s),
        resumable=workload.resumable,
        max_runtime_s=float(workload.max_runtime_s) if workload.max_runtime_s else None,
        metadata=dict(workload.metadata or {}),
        checkpoint_interval_s=float(workload.checkpoint_interval_s)
        if workload.checkpoint_interval_s
        else None,
        grace_s=workload.cluster.preemption_grace_s,
    )


def _to_dispatch(*, record: SchedulingPass, cluster: Cluster) -> list[Decision]:
    """This pass's starts and preemptions plus every cancel not yet taken, in apply order."""
    candidates = (
        Decision.objects.filter(cluster=cluster, dispatched_at__isnull=True, superseded=False)
        .filter(
            Q(scheduling_pass=record, kind__in=[DecisionKind.START, DecisionKind.PREEMPT])
            | Q(kind=DecisionKind.CANCEL)
        )
        .select_related("workload")
    )
    valid: list[Decision] = []
    stale: list[Decision] = []
    for decision in candidates:
        (valid if _still_valid(decision) else stale).append(decision)
    Decision.objects.filter(pk__in=[d.pk for d in stale]).update(superseded=True)
    return sorted(valid, key=lambda d: (KIND_ORDER[d.kind], d.workload_id, d.pk))


def _still_valid(decision: Decision) -> bool:
    workload = decision.workload
    if decision.kind == DecisionKind.START:
        startable = workload.state == WorkloadState.PENDING and not workload.held
        return startable and not workload.cancel_requested_at and bool(workload.backend_ref)
    if decision.kind == DecisionKind.PREEMPT:
        return workload.state == WorkloadState.RUNNING and workload.attempt == decision.attempt
    return bool(workload.backend_ref)


def _lost_words(decisions: list[Decision], *, now: datetime) -> dict[int, str]:
    """decision id -> what its preemption throws away, in words (``wording.preemption_words``), for
    the note the backend shows on the job (Slurm's AdminComment)."""
    preempts = {d.workload_id: d for d in decisions if d.kind == DecisionKind.PREEMPT}
    if not preempts:
        return {}
    words = {}
    for run in Run.objects.filter(workload_id__in=list(preempts), ended_at__isnull=True):
        decision = preempts[run.workload_id]
        workload = decision.workload
        interval = float(workload.checkpoint_interval_s) if workload.checkpoint_interval_s else None
        lost = lost_work(gpus=run.gpus, ran_s=(now - run.started_at).total_seconds(),
                         resumable=workload.resumable, checkpoint_interval_s=interval)  # fmt: skip
        words[decision.pk] = preemption_words(lost)
    return words


def _action(decision: Decision, *, grace_s: int = 0, lost: str = "") -> Action:
    workload = decision.workload
    if decision.kind == DecisionKind.START:
        placement = tuple((node, int(gpus)) for node, gpus in decision.placement)
        return StartAction(
            workload_id=workload.pk, ref=workload.backend_ref, attempt=decision.attempt, placement=placement
        )
    if decision.kind == DecisionKind.PREEMPT:
        return _preempt_action(decision, grace_s=grace_s, lost=lost)
    return CancelAction(workload_id=workload.pk, ref=workload.backend_ref)


def _preempt_action(decision: Decision, *, grace_s: int, lost: str = "") -> PreemptAction:
    workload = decision.workload
    return PreemptAction(
        workload_id=workload.pk,
        ref=workload.backend_ref,
        attempt=decision.attempt,
        requeue=decision.requeue,
        reason=f"{decision.reason} ({lost})" if lost and decision.reason else decision.reason or lost,
        grace_s=grace_s,
    )


def _record_effects(decisions: list[Decision], *, now: datetime) -> None:
    workloads = (
        Workload.objects.select_for_update()
        .select_related("cluster")
        .in_bulk([d.workload_id for d in decisions])
    )
    open_runs = {
        run.workload_id: run
        for run in Run.objects.filter(workload_id__in=list(workloads), ended_at__isnull=True)
    }
    for decision in decisions:
        workload = workloads[decision.workload_id]
        try:
            _record_effect(decision, workload, open_runs.get(workload.pk), now=now)
        except IllegalTransition:
            continue  # the workload moved meanwhile (e.g. cancelled); the next reconcile settles it


def _record_effect(decision: Decision, workload: Workload, run: Run | None, *, now: datetime) -> None:
    if decision.kind == DecisionKind.START:
        workload_transition(workload=workload, to=WorkloadState.RUNNING, now=now, save=False)
        workload.attempt = decision.attempt
        workload_forget_refusals(workload)
        workload.save()
        run_open(
            workload=workload,
            attempt=decision.attempt,
            placement=decision.placement,
            started_at=now,
            protected_until=decision.protected_until or now,
            funded=decision.funded,
        )
        return
    if run is not None:
        reason = EndReason.PREEMPTED if decision.kind == DecisionKind.PREEMPT else EndReason.CANCELLED
        run_close(run=run, ended_at=now, reason=reason)
    if workload.state == WorkloadState.RUNNING:
        workload_transition(workload=workload, to=_after_stop(decision, workload), now=now)


def _after_stop(decision: Decision, workload: Workload) -> str:
    if decision.kind == DecisionKind.CANCEL:
        return WorkloadState.CANCELLED
    return WorkloadState.PENDING if decision.requeue else WorkloadState.PREEMPTED
