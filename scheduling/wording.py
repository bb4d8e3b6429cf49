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
