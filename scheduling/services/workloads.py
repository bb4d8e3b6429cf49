"""Workload services: submit, the state machine, cancel, hold, release, and adoption of native jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone

from budgets.access import can_submit
from budgets.models import BudgetNode
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


def _check_submission(
    *,
    actor,
    cluster: Cluster,
    allocation_path: str,
    gpus: int,
    gpus_per_node: int | None,
    workload_class: str,
    min_runtime_s: int,
    max_runtime_s: int | None,
    gpu_type: str = "",
) -> BudgetNode:
    errors: dict[str, list[str]] = {}
    if gpu_type_errors := _gpu_type_errors(cluster=cluster, gpu_type=gpu_type)[1]:
        errors["gpu_type"] = gpu_type_errors
    node, allocation_errors = _allocation_errors(actor=actor, allocation_path=allocation_path)
    if allocation_errors:
        errors["allocation"] = allocation_errors
    if gpu_errors := _gpu_errors(cluster=cluster, gpus=gpus, gpus_per_node=gpus_per_node):
        errors["gpus"] = gpu_errors
    if workload_class not in WorkloadClass.values:
        errors["workload_class"] = [f"Choose one of {', '.join(WorkloadClass.values)}."]
    if min_runtime_s < 0:
        errors["min_runtime_s"] = ["The minimum runtime cannot be negative (0 means fully preemptible)."]
    if max_runtime_s is not None and max_runtime_s <= 0:
        errors["max_runtime_s"] = ["The declared maximum runtime must be positive."]
    if errors:
        raise SubmissionRefused(errors)
    assert node is not None
    return node


def workload_submit(
    *,
    actor,
    cluster: Cluster,
    allocation_path: str,
    gpus: int,
    gpus_per_node: int | None = None,
    workload_class: str = WorkloadClass.BATCH,
    min_runtime_s: int = 0,
    resumable: bool = False,
    max_runtime_s: int | None = None,
    name: str = "",
    metadata: dict | None = None,
    gpu_type: str = "",
    now: datetime | None = None,
) -> SubmitResult:
    """Queue a workload; it reaches the backend at the next pass. Raises SubmissionRefused, writing nothing.

    A minimum runtime above the cluster's cap is accepted and clipped to the cap, with a warning.
    """
    node = _check_submission(
        actor=actor,
        cluster=cluster,
        allocation_path=allocation_path,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        workload_class=workload_class,
        min_runtime_s=min_runtime_s,
        max_runtime_s=max_runtime_s,
        gpu_type=gpu_type,
    )
    warnings = []
    clipped = min(min_runtime_s, cluster.min_runtime_cap_s)
    if clipped < min_runtime_s:
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
        gpu_type=_gpu_type_errors(cluster=cluster, gpu_type=gpu_type)[0],
        min_runtime_s=clipped,
        min_runtime_requested_s=min_runtime_s,
        resumable=resumable,
        max_runtime_s=max_runtime_s,
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
    return workload


@transaction.atomic
def workload_release(*, workload: Workload, actor) -> Workload:
    workload = _locked(workload)
    if not workload.held:
        raise IllegalTransition(f"workload {workload.pk} is not held")
    workload.held, workload.held_by, workload.held_at, workload.held_note = False, "", None, ""
    workload_forget_refusals(workload)  # released: the backend gets new tries
    workload.save(update_fields=["held", "held_by", "held_at", "held_note", "metadata"])
    return workload


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

    Running jobs are adopted as running (the caller opens their run); waiting ones as pending.
    """
    owner = get_user_model().objects.filter(username=job.user).first() if job.user else None
    submitted = datetime.fromtimestamp(job.started_at, tz=timezone.utc) if job.started_at else now
    min_runtime = int(job.min_runtime_s or 0)
    return Workload.objects.create(
        cluster=cluster,
        allocation=_allocation_for_account(job.account),
        owner=owner,
        user_name=job.user or "unknown",
        name=job.name or job.ref,
        gpus=max(job.gpus, 1),
        gpus_per_node=job.gpus_per_node,
        min_runtime_s=min(min_runtime, cluster.min_runtime_cap_s),
        min_runtime_requested_s=min_runtime,
        resumable=bool(job.resumable),
        source=WorkloadSource.NATIVE,
        backend_ref=job.ref,
        metadata={"account": job.account},
        submitted_at=min(submitted, now),
        queued_at=min(submitted, now),
        state_changed_at=now,
    )
