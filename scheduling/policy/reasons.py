"""Pending reasons (DESIGN 6): one code, its parameters and one plain sentence per workload.

Sentences are built once per group (a shape, an allocation, a reservation) and shared by every
workload in it; only the workload id and position differ. A pass makes one reason per pending
workload (100,000 of them), so they are filled in as ``Draft`` objects (plain slot stores, which
the frozen ``PendingReason`` refuses) and then made ``PendingReason`` in place by ``finish``: about
twice as fast as filling the frozen class's slots through its descriptors, and four times as fast
as its ``__init__``. What comes out is an ordinary frozen ``PendingReason``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from itertools import repeat
from types import MappingProxyType

from scheduling.policy.placement import Shape
from scheduling.policy.types import PendingReason, PendingWorkload, ReasonCode

Outcome = tuple[ReasonCode, Mapping[str, object], str, float | None]  # code, params, message, estimate


class Draft:
    """A ``PendingReason`` being filled in: the same slots in the same order (so CPython lets
    ``finish`` change its class), with plain attribute stores."""

    __slots__ = PendingReason.__slots__


_FIELDS = ("workload_id", "code", "params", "message", "position", "estimated_start")
assert tuple(PendingReason.__slots__) == _FIELDS, "PendingReason fields changed: update the drafts' fills"

_drain = deque(maxlen=0).extend  # runs a map to its end, keeping nothing


def finish(drafts: list) -> list[PendingReason]:
    """Make every (completely filled) draft a ``PendingReason``, in place; returns the same list."""
    _drain(map(setattr, drafts, repeat("__class__"), repeat(PendingReason)))
    return drafts


def make_reason(workload_id: int, outcome: Outcome, position: int) -> PendingReason:
    return make_reasons((workload_id,), (outcome,), position)[0]


def make_reasons(
    workload_ids: Sequence[int], outcomes: Sequence[Outcome], first_position: int
) -> list[PendingReason]:
    """One reason per (id, outcome), at positions ``first_position``, ``first_position + 1``, ..."""
    drafts = []
    append = drafts.append
    position = first_position
    for workload_id, outcome in zip(workload_ids, outcomes, strict=True):
        draft = Draft()
        draft.workload_id = workload_id
        draft.code, draft.params, draft.message, draft.estimated_start = outcome
        draft.position = position
        position += 1
        append(draft)
    return finish(drafts)


def clock(moment: float | None) -> str:
    """``HH:MM`` (UTC) for a time in seconds; "an unknown time" for None or infinity."""
    if moment is None or moment == float("inf"):
        return "an unknown time"
    return time.strftime("%H:%M", time.gmtime(moment))


def describe_shape(shape: Shape, node_size: int = 0) -> str:
    """E.g. "8 GPUs on one node", "32 x H100 GPUs on whole nodes", "8 GPUs as 4 nodes with 2 each"."""
    gpus, per_node, gpu_type = shape
    kind = f" x {gpu_type}" if gpu_type else ""
    if per_node is not None and per_node < gpus:
        return f"{gpus}{kind} GPUs as {gpus // per_node} nodes with {per_node} each"
    if per_node is None and node_size and gpus > node_size:
        return f"{gpus}{kind} GPUs on whole nodes"
    return f"{gpus_phrase(gpus, kind)} on one node"


def gpus_phrase(gpus: int, kind: str = "") -> str:
    """ "1 GPU", "8 GPUs", "8 x H100 GPUs": researchers read these sentences, so the plural is right."""
    return f"{gpus}{kind} GPU" if gpus == 1 else f"{gpus}{kind} GPUs"


def outcome(code: ReasonCode, message: str, estimate: float | None = None, **params: object) -> Outcome:
    if estimate == float("inf"):
        estimate = None
    return (code, MappingProxyType(params), message, estimate)


def fair_share_queued(ahead: int, allocation: str, ratio: float) -> Outcome:
    shown = "unfunded" if ratio == float("inf") else f"at {ratio:.2f}x its share"
    message = f"{ahead} workloads from allocations further below their budget are ahead of yours; {allocation} is {shown}"
    return outcome(ReasonCode.FAIR_SHARE_QUEUED, message, ahead=ahead, allocation=allocation, ratio=ratio)


def queued_in_order(ahead: int, ordering: str) -> Outcome:
    message = f"{ahead} workloads are ahead of yours in {ordering} order"
    return outcome(ReasonCode.WAITING_FOR_GPUS, message, ahead=ahead, ordering=ordering)


def waiting_for_gpus(shape: Shape, node_size: int, estimate: float) -> Outcome:
    need = describe_shape(shape, node_size)
    if estimate == float("inf"):
        message = f"needs {need}; none is expected to free up at a known time"
    else:
        message = f"needs {need}; the earliest free at ~{clock(estimate)} when running work ends or its protection does"
    return outcome(ReasonCode.WAITING_FOR_GPUS, message, estimate, gpus=shape[0], gpu_type=shape[2])


def fragmented(shape: Shape, node_size: int, free: int, nodes: int, estimate: float) -> Outcome:
    message = f"{free} GPUs are free but spread over {nodes} nodes; needs {describe_shape(shape, node_size)}"
    return outcome(ReasonCode.FRAGMENTED, message, estimate, free_gpus=free, nodes=nodes, gpus=shape[0])


def protected_work(until: float) -> Outcome:
    message = f"could preempt, but the candidates are protected until {clock(until)} (min runtime)"
    return outcome(ReasonCode.PROTECTED_WORK, message, until, protected_until=until)


def reserved_for(workload: PendingWorkload, start_at: float | None) -> Outcome:
    message = f"nodes are held for a {workload.gpus}-GPU job that starts at ~{clock(start_at)}"
    return outcome(
        ReasonCode.RESERVED_FOR_LARGER_JOB, message, None, for_workload=workload.id, start_at=start_at
    )


def unfunded(allocation: str) -> Outcome:
    message = "charged to no budget: runs only on idle capacity and may be preempted at any time"
    return outcome(ReasonCode.UNFUNDED, message, allocation=allocation)


def over_limit(path: str, limit: int) -> Outcome:
    message = f"{path}'s concurrency limit ({limit} GPUs) is reached"
    return outcome(ReasonCode.OVER_LIMIT, message, allocation=path, limit=limit)


def no_matching_nodes(shape: Shape, node_size: int) -> Outcome:
    message = f"no healthy nodes can hold {describe_shape(shape, node_size)}"
    return outcome(ReasonCode.NO_MATCHING_NODES, message, gpus=shape[0], gpu_type=shape[2])


def held(workload: PendingWorkload) -> Outcome:
    who = f" by {workload.held_by}" if workload.held_by else ""
    when = f" at {clock(workload.held_at)}" if workload.held_at is not None else ""
    note = f": '{workload.held_note}'" if workload.held_note else ""
    return outcome(ReasonCode.HELD, f"held{who}{when}{note}", by=workload.held_by, note=workload.held_note)


def backend_unavailable(backend: str, since: float | None, now: float) -> Outcome:
    message = f"the {backend} did not answer at {clock(since if since is not None else now)}; retrying"
    return outcome(ReasonCode.BACKEND_UNAVAILABLE, message, backend=backend, since=since)
