"""What the pages say for the scheduler's internals: reason codes as plain names, why a start
cannot be estimated, and a workload's decisions grouped into lines a researcher reads.

The codes stay in the API and in the pages' tooltips (``title``); people read the names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from scheduling.policy.types import ReasonCode

if TYPE_CHECKING:
    from scheduling.models import Decision

REASON_NAMES: dict[str, str] = {
    ReasonCode.FAIR_SHARE_QUEUED: "Waiting its fair-share turn",
    ReasonCode.WAITING_FOR_GPUS: "Waiting for GPUs to free up",
    ReasonCode.FRAGMENTED: "Free GPUs are spread over nodes",
    ReasonCode.PROTECTED_WORK: "Running work is still protected",
    ReasonCode.RESERVED_FOR_LARGER_JOB: "Nodes held for a larger job",
    ReasonCode.UNFUNDED: "Unfunded: idle capacity only",
    ReasonCode.OVER_LIMIT: "Allocation at its GPU limit",
    ReasonCode.HELD: "Held",
    ReasonCode.BACKEND_UNAVAILABLE: "Cluster not answering",
    ReasonCode.NO_MATCHING_NODES: "No node can hold it",
}

# Why the scheduler gives no start time, per reason, in words.
UNKNOWN_START: dict[str, str] = {
    ReasonCode.FAIR_SHARE_QUEUED: "no estimate: it depends on when the workloads ahead of it start and end",
    ReasonCode.WAITING_FOR_GPUS: "no estimate: the running work it waits for declares no end time",
    ReasonCode.FRAGMENTED: "no estimate: it needs whole nodes, and none is known to free up",
    ReasonCode.PROTECTED_WORK: "no estimate: it depends on when the protected work ends",
    ReasonCode.RESERVED_FOR_LARGER_JOB: "no estimate: it can start only after the larger job holding the nodes has",
    ReasonCode.UNFUNDED: "no estimate: unfunded work starts only when GPUs sit idle",
    ReasonCode.OVER_LIMIT: "no estimate: it waits until its allocation's own running work ends",
    ReasonCode.HELD: "not while it is held: it starts only after it is released",
    ReasonCode.BACKEND_UNAVAILABLE: "no estimate while the cluster does not answer",
    ReasonCode.NO_MATCHING_NODES: "never as it is: no healthy node can hold it",
}
NOT_YET_PLANNED = "no estimate yet: the next scheduling pass will give one"


def reason_name(code: str | None) -> str:
    """The plain name of a pending-reason code ("Waiting for GPUs to free up"); unknown codes as
    words rather than SHOUTING_SNAKE."""
    if not code:
        return "Waiting for the next scheduling pass"
    return REASON_NAMES.get(code) or code.replace("_", " ").capitalize()


def unknown_start(code: str | None) -> str:
    """Why a pending workload with this reason has no estimated start, in words."""
    return UNKNOWN_START.get(code or "", NOT_YET_PLANNED)


@dataclass(frozen=True)
class DecisionGroup:
    """Consecutive decisions of one kind and reason: "Reserve ×30 between 19:31 and 19:33"."""

    kind: str
    reason: str
    count: int
    first: datetime
    last: datetime


def group_decisions(decisions: Iterable[Decision]) -> list[DecisionGroup]:
    """Runs of the same kind and reason folded into one line, in the order given (newest first);
    ``first`` and ``last`` are the earliest and latest moments of the run."""
    groups: list[DecisionGroup] = []
    for decision in decisions:
        kind = decision.get_kind_display()
        reason = decision.reason or ""
        moment = decision.created_at
        if groups and groups[-1].kind == kind and groups[-1].reason == reason:
            previous = groups[-1]
            groups[-1] = DecisionGroup(
                kind, reason, previous.count + 1, min(previous.first, moment), max(previous.last, moment)
            )
        else:
            groups.append(DecisionGroup(kind, reason, 1, moment, moment))
    return groups


@dataclass(frozen=True)
class LostWork:
    """What a preemption threw away (DESIGN 2, issue 17): the run's length, the time since its last
    checkpoint (None: not resumable, or no interval declared) and the GPU-hours lost."""

    ran_s: float
    since_checkpoint_s: float | None
    lost_gpu_h: float
    resumable: bool


def lost_work(*, gpus: int, ran_s: float, resumable: bool, checkpoint_interval_s: float | None) -> LostWork:
    """The rule of ``policy.rules.work_lost``: work that is not resumable loses the whole run;
    resumable work checkpoints every ``checkpoint_interval_s`` from its start and loses the time
    since the last one (nothing when it declared no interval: it saves when it is stopped)."""
    ran_s = max(ran_s, 0.0)
    if not resumable:
        return LostWork(ran_s, None, gpus * ran_s / 3600, False)
    if not checkpoint_interval_s or checkpoint_interval_s <= 0:
        return LostWork(ran_s, None, 0.0, True)
    since = ran_s % checkpoint_interval_s
    return LostWork(ran_s, since, gpus * since / 3600, True)


def _hours_minutes(seconds: float) -> str:
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def preemption_words(lost: LostWork) -> str:
    """What a preempted workload's owner reads about what it lost, e.g. "preempted after 3 h 10 min;
    it resumes from its last checkpoint (10 min ago, about 1.3 GPU-hours lost)"."""
    after = f"preempted after {_hours_minutes(lost.ran_s)}"
    if not lost.resumable:
        return f"{after}; it ended; about {lost.lost_gpu_h:.1f} GPU-hours of work were lost"
    if lost.since_checkpoint_s is None:
        return f"{after}; it resumes from its last checkpoint (no checkpoint interval declared: counted as no work lost)"
    return (
        f"{after}; it resumes from its last checkpoint ({_hours_minutes(lost.since_checkpoint_s)} ago, "
        f"about {lost.lost_gpu_h:.1f} GPU-hours lost)"
    )
