"""The words of each event: a subject, a plain-text body and a link, written when it is fanned out.

The pass records only the event's key and a few ids; everything a person reads is composed here, in
a worker, from the rows as they are then (the run that was preempted, the workload that was held).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from budgets.models import BudgetNode
from notifications.models import Event, EventKind
from portal.links import absolute_url
from scheduling.backend_notes import workload_url
from scheduling.models import Cluster, Run, Workload
from scheduling.sessions import renewals_left
from scheduling.wording import LostWork, lost_work, preemption_words


@dataclass(frozen=True)
class Message:
    subject: str
    body: str
    url: str = ""


def _workload_label(workload: Workload) -> str:
    name = f" “{workload.name}”" if workload.name else ""
    allocation = workload.allocation.path if workload.allocation is not None else "unfunded"
    return f"workload {workload.pk}{name} ({workload.gpus} GPUs, {allocation})"


def _workload(event: Event) -> Workload:
    """The workload of a workload event (started, preempted, ...): every one records it."""
    if event.workload is None:
        raise ValueError(f"event {event.key} ({event.kind}) has no workload")
    return event.workload


def _cluster(event: Event) -> Cluster:
    """The cluster of a cluster event (under owed, availability, backend, passes)."""
    if event.cluster is None:
        raise ValueError(f"event {event.key} ({event.kind}) has no cluster")
    return event.cluster


def _node(event: Event) -> BudgetNode:
    """The budget node of an under-owed event."""
    if event.node is None:
        raise ValueError(f"event {event.key} ({event.kind}) has no budget node")
    return event.node


def _workload_url(event: Event) -> str:
    return workload_url(_workload(event).pk)


def _started(event: Event) -> Message:
    workload = _workload(event)
    return Message(f"Started: {_workload_label(workload)}",
                   f"Your {_workload_label(workload)} started on {workload.cluster.name} "
                   f"(attempt {event.params.get('attempt', workload.attempt)}).", _workload_url(event))  # fmt: skip


def run_lost_work(run: Run, workload: Workload) -> LostWork:
    """What the preemption that ended ``run`` threw away, by the workload's declared checkpoint
    interval (``scheduling.wording.lost_work``)."""
    ran_s = ((run.ended_at or run.started_at) - run.started_at).total_seconds()
    interval = float(workload.checkpoint_interval_s) if workload.checkpoint_interval_s else None
    return lost_work(gpus=run.gpus, ran_s=ran_s, resumable=workload.resumable, checkpoint_interval_s=interval)


def lost_gpu_hours(run: Run, workload: Workload) -> float:
    """GPU-hours a preemption threw away (``run_lost_work``)."""
    return run_lost_work(run, workload).lost_gpu_h


def _preempted(event: Event) -> Message:
    workload = _workload(event)
    run = Run.objects.filter(pk=event.params.get("run_id")).first()
    lost = preemption_words(run_lost_work(run, workload)) if run else "preempted"
    after = (
        "It was requeued with its original submit time."
        if workload.resumable
        else "Submit it again (declare it resumable, with a checkpoint interval, to be requeued instead)."
    )
    return Message(f"Preempted: {_workload_label(workload)}",
                   f"Your {_workload_label(workload)} on {workload.cluster.name} was {lost}. {after}",
                   _workload_url(event))  # fmt: skip


def _protection_ending(event: Event) -> Message:
    workload = _workload(event)
    minutes = event.params.get("minutes", settings.NOTIFY_PROTECTION_WARNING_MIN)
    renew = ""
    if workload.workload_class == "interactive":
        left = renewals_left(workload=workload, now=event.created_at)
        renew = (
            f" If the session is busy you may renew its protection ({left} renewal{'s' if left != 1 else ''} "
            f"left in 24 hours): the Renew protection button on its page, or `gpus renew {workload.pk}`."
            if left
            else " It has used all its renewals for the last 24 hours."
        )
    return Message(f"Protection ends in {minutes} min: {_workload_label(workload)}",
                   f"Your {_workload_label(workload)} is protected from preemption until "
                   f"{event.params.get('protected_until', '')} (about {minutes} minutes). After that the "
                   f"scheduler may preempt it to rebalance; save your work or checkpoint now.{renew}",
                   _workload_url(event))  # fmt: skip


def _held(event: Event) -> Message:
    workload = _workload(event)
    note = f": “{workload.held_note}”" if workload.held_note else ""
    return Message(f"Held: {_workload_label(workload)}",
                   f"Your {_workload_label(workload)} was held by {workload.held_by or 'someone'}{note}. "
                   f"It will not start until it is released.", _workload_url(event))  # fmt: skip


def _start_refused(event: Event) -> Message:
    workload = _workload(event)
    return Message(f"Start refused by the backend: {_workload_label(workload)}",
                   f"The {workload.cluster.get_backend_kind_display()} backend refused to start your "
                   f"{_workload_label(workload)}: {event.params.get('why', '')}", _workload_url(event))  # fmt: skip


def _under_owed(event: Event) -> Message:
    p = event.params
    cluster, node = _cluster(event), _node(event)
    url = absolute_url(reverse("budgets:delivery", args=[cluster.slug, event.node_id]))
    return Message(f"{node.path} got {p['ratio'] * 100:.0f}% of what it was owed on {cluster.name}",
                   f"Over the last day, {node.path} on {cluster.name} was delivered "
                   f"{p['delivered_gpu_h']:,.0f} of the {p['owed_gpu_h']:,.0f} GPU-hours it was owed "
                   f"({p['ratio'] * 100:.1f}%, under the 95% target).", url)  # fmt: skip


def _digest(event: Event) -> Message:
    lines = [
        f"- {row['path']} on {row['cluster']}: {row['delivered_gpu_h']:,.0f} / {row['owed_gpu_h']:,.0f} GPU-hours"
        + (f" ({row['ratio'] * 100:.0f}%)" if row.get("ratio") is not None else "")
        for row in event.params.get("rows", [])
    ]
    body = "Delivered / owed over the last 7 days:\n" + ("\n".join(lines) or "- nothing was owed")
    return Message("Your weekly delivery digest", body, absolute_url(reverse("notifications:list")))


def _availability(event: Event) -> Message:
    p = event.params
    cluster = _cluster(event)
    return Message(f"Availability of {cluster.name} is {p['availability'] * 100:.0f}%",
                   f"{p['healthy']} of {p['installed']} GPUs on {cluster.name} are healthy "
                   f"({p['availability'] * 100:.1f}%, below {p['threshold_pct']}%).",
                   absolute_url(reverse("home")))  # fmt: skip


def _backend(event: Event) -> Message:
    p = event.params
    cluster = _cluster(event)
    return Message(f"The {cluster.name} backend has been unavailable for {p['minutes']} min",
                   f"Since {p['since']}, every pass of {cluster.name} found its backend unavailable: "
                   f"{p.get('error', '')}. Nothing starts or stops until it answers.", absolute_url(reverse("home")))  # fmt: skip


def _passes(event: Event) -> Message:
    p = event.params
    cluster = _cluster(event)
    return Message(f"Scheduling passes of {cluster.name} are failing",
                   f"The last {p['count']} passes of {cluster.name} failed; the latest: {p.get('error', '')}",
                   absolute_url(reverse("home")))  # fmt: skip


WRITERS: dict[str, Callable[[Event], Message]] = {
    EventKind.STARTED: _started, EventKind.PREEMPTED: _preempted, EventKind.PROTECTION_ENDING: _protection_ending,
    EventKind.HELD: _held, EventKind.START_REFUSED: _start_refused, EventKind.UNDER_OWED: _under_owed,
    EventKind.WEEKLY_DIGEST: _digest, EventKind.AVAILABILITY_LOW: _availability,
    EventKind.BACKEND_UNAVAILABLE: _backend, EventKind.PASSES_FAILING: _passes,
}  # fmt: skip


def message_for(event: Event) -> Message:
    return WRITERS[event.kind](event)
