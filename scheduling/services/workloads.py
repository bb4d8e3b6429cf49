"""Workload services: submit, the state machine, cancel, hold, release, and adoption of native jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime  # UTC is datetime.timezone.utc
from typing import TypedDict

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone

from budgets.access import can_submit
from budgets.models import BudgetNode
from notifications.models import EventKind
from notifications.services import event_record
from scheduling.backends.base import ObservedJob
from scheduling.models import (
    ALLOWED_TRANSITIONS,
    TERMINAL_STATES,
    Cluster,
    Decision,
    DecisionKind,
    Node,
    Workload,
    WorkloadClass,
    WorkloadSource,
    WorkloadState,
)


class IllegalTransition(ValueError):
    """The state machine refused a move (e.g. completed -> running)."""


class SubmissionRefused(ValueError):
    """A submission that can never be accepted; ``errors`` maps field names to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class SubmitResult:
    workload: Workload
    warnings: list[str] = field(default_factory=list)


def _cluster_shape(cluster: Cluster) -> tuple[int, int]:
    """(GPUs per node of the largest node, total GPUs) as the cluster last reported them."""
    shape = Node.objects.filter(cluster=cluster).aggregate(node_size=Max("gpus"), total=Sum("gpus"))
    return shape["node_size"] or 0, shape["total"] or 0


def _gpu_errors(*, cluster: Cluster, gpus: int, gpus_per_node: int | None) -> list[str]:
    """Why a GPU request can never fit (DESIGN 5.1). Clusters with no known nodes yet accept anything."""
    if gpus < 1:
        return ["Ask for at least 1 GPU."]
    node_size, total = _cluster_shape(cluster)
    if not node_size:
        return []
    if gpus > total:
        return [f"{gpus} GPUs can never fit: {cluster.name} has {total} GPUs in all."]
    if gpus > node_size and gpus % node_size:
        return [
            f"{gpus} GPUs need more than one {node_size}-GPU node, so they must be a whole number of "
            f"nodes (a multiple of {node_size}, e.g. {gpus - gpus % node_size} or {gpus + node_size - gpus % node_size})."
        ]
    if gpus_per_node is not None and (gpus_per_node > node_size or gpus % gpus_per_node):
        return [f"gpus_per_node must divide {gpus} and be at most {node_size} (the node size)."]
    return []


def _gpu_type_errors(*, cluster: Cluster, gpu_type: str) -> tuple[str, list[str]]:
    """The GPU type as the cluster spells it, or why it is not one of the cluster's node types.

    Empty means any type. A cluster with no known nodes yet offers its declared ``gpu_type``.
    """
    if not gpu_type:
        return "", []
    offered = sorted(set(Node.objects.filter(cluster=cluster).values_list("gpu_type", flat=True)) - {""})
    offered = offered or [cluster.gpu_type]
    for known in offered:
        if known.lower() == gpu_type.lower():
            return known, []
    return "", [f"{cluster.name} has no {gpu_type} GPUs; its nodes have: {', '.join(offered)}."]


def _allocation_errors(*, actor, allocation_path: str) -> tuple[BudgetNode | None, list[str]]:
    node = BudgetNode.objects.filter(path=allocation_path).first()
    if node is None:
        return None, [f"There is no allocation named {allocation_path!r}."]
    if node.archived:
        return None, [f"{allocation_path} is archived and takes no new work."]
    if actor is not None and not can_submit(actor, node):
        return None, [
            f"You are not a member of {allocation_path}; you can submit only to your own allocations."
        ]
    return node, []


def _contract_errors(
    *, min_runtime_s: int, max_runtime_s: int | None, checkpoint_interval_s: int | None
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if min_runtime_s < 0:
        errors["min_runtime_s"] = ["The minimum runtime cannot be negative (0 means fully preemptible)."]
    if max_runtime_s is not None and max_runtime_s <= 0:
        errors["max_runtime_s"] = ["The declared maximum runtime must be positive."]
    if checkpoint_interval_s is not None and checkpoint_interval_s <= 0:
        errors["checkpoint_interval_s"] = ["The checkpoint interval must be positive (leave it out if none)."]
    return errors


def _check_submission(
    *,
    actor,
    cluster: Cluster,
    allocation_path: str | None,
    gpus: int,
    gpus_per_node: int | None,
    gpu_type: str,
    workload_class: str,
    min_runtime_s: int,
    max_runtime_s: int | None,
    checkpoint_interval_s: int | None,
) -> tuple[BudgetNode | None, str]:
    """The allocation node (None: unfunded) and the GPU type as the cluster spells it, or
    SubmissionRefused with every field's errors."""
    errors: dict[str, list[str]] = {}
    node = None
    if allocation_path is not None:
        node, allocation_errors = _allocation_errors(actor=actor, allocation_path=allocation_path)
        if allocation_errors:
            errors["allocation"] = allocation_errors
    if gpu_errors := _gpu_errors(cluster=cluster, gpus=gpus, gpus_per_node=gpus_per_node):
        errors["gpus"] = gpu_errors
    known_type, type_errors = _gpu_type_errors(cluster=cluster, gpu_type=gpu_type)
    if type_errors:
        errors["gpu_type"] = type_errors
    if workload_class not in WorkloadClass.values:
        errors["workload_class"] = [f"Choose one of {', '.join(WorkloadClass.values)}."]
    errors |= _contract_errors(
        min_runtime_s=min_runtime_s, max_runtime_s=max_runtime_s, checkpoint_interval_s=checkpoint_interval_s
    )
    if errors:
        raise SubmissionRefused(errors)
    return node, known_type


def workload_submit(
    *,
    actor,
    cluster: Cluster,
    allocation_path: str | None,
    gpus: int,
    gpus_per_node: int | None = None,
    gpu_type: str = "",
    workload_class: str = WorkloadClass.BATCH,
    min_runtime_s: int = 0,
    resumable: bool = False,
    max_runtime_s: int | None = None,
    checkpoint_interval_s: int | None = None,
    name: str = "",
    metadata: dict | None = None,
    now: datetime | None = None,
) -> SubmitResult:
    """Queue a workload; it reaches the backend at the next pass. Raises SubmissionRefused, writing nothing.

    ``allocation_path`` None charges it to no budget (unfunded: idle capacity only, never protected).
    A minimum runtime above the cluster's cap is accepted and clipped to the cap, with a warning.
    """
    node, gpu_type = _check_submission(
        actor=actor,
        cluster=cluster,
        allocation_path=allocation_path,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        gpu_type=gpu_type,
        workload_class=workload_class,
        min_runtime_s=min_runtime_s,
        max_runtime_s=max_runtime_s,
        checkpoint_interval_s=checkpoint_interval_s,
    )
    warnings = []
    if checkpoint_interval_s is not None and not resumable:
        warnings.append(
            "A checkpoint interval only matters for resumable work: a preemption ends this workload."
        )
    clipped = capped_min_runtime(min_runtime_s, cluster=cluster, max_runtime_s=max_runtime_s)
    if min(min_runtime_s, cluster.min_runtime_cap_s) < min_runtime_s:
        warnings.append(
            f"The minimum runtime {min_runtime_s} s is above {cluster.name}'s cap of "
            f"{cluster.min_runtime_cap_s} s; it is protected for {clipped} s only."
        )
    now = now or timezone.now()
    workload = Workload.objects.create(
        cluster=cluster,
        allocation=node,
        owner=actor if getattr(actor, "pk", None) else None,
        user_name=getattr(actor, "username", "") or "",
        name=name,
        workload_class=workload_class,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        gpu_type=gpu_type,
        min_runtime_s=clipped,
        min_runtime_requested_s=min_runtime_s,
        resumable=resumable,
        max_runtime_s=max_runtime_s,
        checkpoint_interval_s=checkpoint_interval_s,
        metadata=metadata or {},
        submitted_at=now,
        queued_at=now,
        state_changed_at=now,
    )
    return SubmitResult(workload=workload, warnings=warnings)


def workload_transition(*, workload: Workload, to: str, now: datetime, save: bool = True) -> Workload:
    """Move a workload along the state machine; raise IllegalTransition for a move it does not allow."""
    if to not in ALLOWED_TRANSITIONS.get(workload.state, frozenset()):
        raise IllegalTransition(f"workload {workload.pk} cannot go from {workload.state} to {to}")
    leaving_running = workload.state == WorkloadState.RUNNING
    workload.state = to
    workload.state_changed_at = now
    if to == WorkloadState.PENDING and leaving_running:
        workload.queued_at = now
        workload.requeue_count += 1
    if to == WorkloadState.RUNNING and workload.first_started_at is None:
        workload.first_started_at = now
    if to in TERMINAL_STATES:
        workload.finished_at = now
    if save:
        workload.save()
    return workload


def _locked(workload: Workload) -> Workload:
    return Workload.objects.select_for_update().get(pk=workload.pk)


@transaction.atomic
def workload_cancel(*, workload: Workload, actor, now: datetime | None = None) -> Workload:
    """Cancel: pending work ends now; running work is stopped by the next pass (its run closes then).

    Either way a cancel decision is queued for the backend until it takes it (idempotent).
    """
    now = now or timezone.now()
    workload = _locked(workload)
    if workload.state in TERMINAL_STATES:
        raise IllegalTransition(f"workload {workload.pk} is already {workload.state}")
    if workload.backend_ref:
        Decision.objects.create(
            cluster_id=workload.cluster_id,
            workload=workload,
            kind=DecisionKind.CANCEL,
            attempt=workload.attempt,
            reason=f"cancelled by {getattr(actor, 'username', 'the portal')}",
            created_at=now,
        )
    if workload.state == WorkloadState.PENDING:
        return workload_transition(workload=workload, to=WorkloadState.CANCELLED, now=now)
    workload.cancel_requested_at = now
    workload.save(update_fields=["cancel_requested_at"])
    return workload


@transaction.atomic
def workload_hold(*, workload: Workload, actor, note: str = "", now: datetime | None = None) -> Workload:
    """Keep a pending workload from starting until it is released (pending reason HELD)."""
    workload = _locked(workload)
    if workload.state != WorkloadState.PENDING:
        raise IllegalTransition(f"only pending work can be held; workload {workload.pk} is {workload.state}")
    workload.held = True
    workload.held_by = getattr(actor, "username", "") or ""
    workload.held_at = now or timezone.now()
    workload.held_note = note[:500]
    workload.save(update_fields=["held", "held_by", "held_at", "held_note"])
    workload_held_record(workload)
    return workload


def workload_held_record(workload: Workload) -> None:
    """The owner is told a workload was held (by a person, or by the scheduler after refusals)."""
    held_at = workload.held_at
    if held_at is None:
        raise ValueError(f"workload {workload.pk} is not held")
    event_record(kind=EventKind.HELD, key=f"held:{workload.pk}:{held_at.isoformat()}", now=held_at,
                 cluster_id=workload.cluster_id, workload_id=workload.pk)  # fmt: skip


@transaction.atomic
def workload_release(*, workload: Workload, actor) -> Workload:
    workload = _locked(workload)
    if not workload.held:
        raise IllegalTransition(f"workload {workload.pk} is not held")
    workload.held, workload.held_by, workload.held_at, workload.held_note = False, "", None, ""
    workload_forget_refusals(workload)  # released: the backend gets new tries
    workload.save(update_fields=["held", "held_by", "held_at", "held_note", "metadata"])
    return workload


RESUBMIT_CHANGES = frozenset({"gpus", "gpus_per_node", "gpu_type", "min_runtime_s", "allocation"})
UNFUNDED = "(unfunded)"  # the start option's allocation for "charged to no budget" (policy.options)


class Resubmission(TypedDict):
    """The arguments of :func:`workload_submit` (but the actor) that repeat a workload."""

    cluster: Cluster
    allocation_path: str | None
    gpus: int
    gpus_per_node: int | None
    gpu_type: str
    workload_class: str
    min_runtime_s: int
    resumable: bool
    max_runtime_s: int | None
    checkpoint_interval_s: int | None
    name: str
    metadata: dict


def _whole(changes: dict[str, object], key: str, default: int) -> int:
    """A start option's whole number (``int()`` of what was posted), else a field error."""
    value = changes.get(key, default)
    if not isinstance(value, int | float | str):
        raise SubmissionRefused({key: ["A whole number."]})
    return int(value)


def _per_node(changes: dict[str, object], default: int | None) -> int | None:
    """A start option's GPUs per node: a whole number, or None for any layout."""
    value = changes.get("gpus_per_node", default)
    if value is not None and not isinstance(value, int):
        raise SubmissionRefused({"gpus_per_node": ["A whole number of GPUs per node."]})
    return value


def _resubmission(workload: Workload, changes: dict[str, object]) -> Resubmission:
    """The submission that repeats ``workload`` with ``changes`` (start-option fields) applied."""
    unknown = sorted(set(changes) - RESUBMIT_CHANGES)
    if unknown:
        raise SubmissionRefused({key: ["A start option cannot change this."] for key in unknown})
    allocation = changes.get("allocation", workload.allocation_path or None)
    metadata = {key: value for key, value in workload.metadata.items() if key != START_REFUSALS}
    return Resubmission(
        {
            "cluster": workload.cluster,
            "allocation_path": None if allocation in (UNFUNDED, None) else str(allocation),
            "gpus": _whole(changes, "gpus", workload.gpus),
            "gpus_per_node": _per_node(changes, workload.gpus_per_node),
            "gpu_type": str(changes.get("gpu_type", workload.gpu_type) or ""),
            "workload_class": workload.workload_class,
            "min_runtime_s": _whole(changes, "min_runtime_s", workload.min_runtime_requested_s),
            "resumable": workload.resumable,
            "max_runtime_s": workload.max_runtime_s,
            "checkpoint_interval_s": workload.checkpoint_interval_s,
            "name": workload.name,
            "metadata": {**metadata, "resubmitted_from": workload.pk},
        }
    )


def _user_named(username: str):  # noqa: ANN202
    return get_user_model().objects.filter(username=username).first() if username else None


@transaction.atomic
def workload_resubmit(*, workload: Workload, actor, changes: dict[str, object]) -> SubmitResult:
    """A new workload like ``workload`` with one start option's ``changes``, and the old one cancelled.

    Both or neither: a refused submission cancels nothing. The new workload keeps the old one's owner
    (or, recorded without one, the user it names): a manager acting for a researcher does not take
    the work over. It waits from now.
    """
    workload = _locked(workload)
    if workload.state != WorkloadState.PENDING:
        raise IllegalTransition(
            f"only pending work can be resubmitted; workload {workload.pk} is {workload.state}"
        )
    submitter = workload.owner or _user_named(workload.user_name) or actor
    result = workload_submit(actor=submitter, **_resubmission(workload, changes))
    workload_cancel(workload=workload, actor=actor)
    return result


START_REFUSALS = "start_refusals"  # metadata key: starts the backend refused in a row (dispatch)


def workload_forget_refusals(workload: Workload) -> None:
    """Drop the count of refused starts from ``workload.metadata`` (not saved): it counts in a row."""
    if workload.metadata and START_REFUSALS in workload.metadata:
        workload.metadata = {key: value for key, value in workload.metadata.items() if key != START_REFUSALS}


def _allocation_for_account(account: str) -> BudgetNode | None:
    """A native job's account is the allocation path, or its last segment (Slurm account names)."""
    if not account:
        return None
    exact = BudgetNode.objects.filter(path=account).first()
    if exact is not None:
        return exact
    matches = list(BudgetNode.objects.filter(slug=account)[:2])
    return matches[0] if len(matches) == 1 else None


def workload_adopt(*, cluster: Cluster, job: ObservedJob, now: datetime) -> Workload:
    """Record a job submitted natively to the backend (no workload id) as a workload of ours.

    Running jobs are adopted as running (the caller opens their run); waiting ones as pending. The
    submit time is the backend's (an array's tasks share theirs), not the start time; the declared
    maximum runtime (Slurm ``--time``) caps the minimum runtime. A hold the portal did not set (the
    user's ``scontrol hold``) is kept as the workload's hold.
    """
    owner = get_user_model().objects.filter(username=job.user).first() if job.user else None
    stamp = job.submitted_at or job.started_at
    submitted = min(datetime.fromtimestamp(stamp, tz=UTC), now) if stamp else now
    max_runtime = int(job.max_runtime_s) if job.max_runtime_s else None
    min_runtime = int(job.min_runtime_s or 0)
    return Workload.objects.create(
        cluster=cluster,
        allocation=_allocation_for_account(job.account),
        owner=owner,
        user_name=(job.user or "unknown")[:150],
        name=(job.name or job.ref)[:200],
        gpus=max(job.gpus, 1),
        gpus_per_node=job.gpus_per_node,
        min_runtime_s=capped_min_runtime(min_runtime, cluster=cluster, max_runtime_s=max_runtime),
        min_runtime_requested_s=min_runtime,
        max_runtime_s=max_runtime,
        resumable=bool(job.resumable),
        checkpoint_interval_s=int(job.checkpoint_interval_s)
        if job.resumable and job.checkpoint_interval_s
        else None,
        source=WorkloadSource.NATIVE,
        backend_ref=job.ref,
        metadata={"account": job.account},
        submitted_at=submitted,
        queued_at=submitted,
        state_changed_at=now,
        **hold_fields(job, now=now),
    )


def capped_min_runtime(min_runtime_s: int, *, cluster: Cluster, max_runtime_s: int | None) -> int:
    """Protection never outlasts the cluster's cap nor the workload's declared maximum runtime."""
    caps = [min_runtime_s, cluster.min_runtime_cap_s]
    if max_runtime_s:
        caps.append(max_runtime_s)
    return min(caps)


BACKEND_HOLD_NOTE = "held in the backend (e.g. scontrol hold); release it there"


def hold_fields(job: ObservedJob, *, now: datetime) -> dict:
    """The workload's hold for a job the backend reports held by someone else than the portal."""
    if not job.held_by:
        return {}
    return {"held": True, "held_by": job.held_by[:150], "held_at": now, "held_note": BACKEND_HOLD_NOTE}


def workload_follow_backend_hold(*, workload: Workload, job: ObservedJob, now: datetime) -> bool:
    """Mirror a hold set or lifted in the backend onto a pending workload; True when it changed.

    Only holds the backend reports are lifted here: a hold set in the portal stays until the portal
    releases it."""
    if workload.state != WorkloadState.PENDING:
        return False
    if job.held_by and not workload.held:
        for name, value in hold_fields(job, now=now).items():
            setattr(workload, name, value)
    elif not job.held_by and workload.held and workload.held_note == BACKEND_HOLD_NOTE:
        workload.held, workload.held_by, workload.held_at, workload.held_note = False, "", None, ""
    else:
        return False
    workload.save(update_fields=["held", "held_by", "held_at", "held_note"])
    return True
