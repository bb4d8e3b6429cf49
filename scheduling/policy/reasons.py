"""Pending reasons (DESIGN 6): one code, its parameters and one plain sentence per workload.

Sentences are built once per group (a shape, an allocation, a reservation) and shared by every
workload in it; only the workload id and position differ. A pass explains every pending workload
(100,000 of them), so it does not make 100,000 objects: it hands back ``Reasons``, two parallel
lists (the workloads, their shared outcomes) that make each ``PendingReason`` when it is read. Building
those lists takes a few C-level sweeps over the queue; making every object too would cost more
than the rest of the explaining. Whoever reads them all (the live pass, to store them) pays for
the objects then, once: ``Reasons`` keeps what it made.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from scheduling.policy.placement import Shape
from scheduling.policy.types import PendingReason, PendingWorkload, ReasonCode, WorkloadId

Outcome = tuple[ReasonCode, Mapping[str, object], str, float | None]  # code, params, message, estimate


class Draft:
    """A ``PendingReason`` being filled in: the same slots in the same order (so CPython lets
    ``finish`` change its class), with plain attribute stores."""

    __slots__ = PendingReason.__slots__
    # the slots' types (bare annotations: no class attributes), as on PendingReason
    workload_id: WorkloadId
    code: ReasonCode
    params: Mapping[str, object]
    message: str
    position: int
    estimated_start: float | None


_FIELDS = ("workload_id", "code", "params", "message", "position", "estimated_start")
assert tuple(PendingReason.__slots__) == _FIELDS, "PendingReason fields changed: update the drafts' fills"

_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # runs a map to its end, keeping nothing
_ID = attrgetter("id")


def finish(drafts: list) -> list[PendingReason]:
    """Make every (completely filled) draft a ``PendingReason``, in place; returns the same list."""
    _drain(map(setattr, drafts, repeat("__class__"), repeat(PendingReason)))
    return drafts


def make_reason(workload_id: int, outcome: Outcome, position: int) -> PendingReason:
    return make_reasons((workload_id,), (outcome,), position)[0]


class Reasons(Sequence[PendingReason]):
    """A plan's pending reasons: ``PendingReason`` objects made when read (see the module's
    docstring), equal to the tuple of them (and to any sequence of the same reasons).

    ``workloads``: the explained workloads (anything with an ``id``), in order; the pass hands over
    references, not ids, since reading 100,000 ids costs as much as the rest of the lists.
    ``positions`` None: the i-th reason is at position i + 1 (the whole order); else one per reason.
    """

    __slots__ = ("_workloads", "_outcomes", "_positions", "_made", "_at")

    def __init__(self, workloads: list, outcomes: list[Outcome], positions: list[int] | None = None) -> None:
        if len(workloads) != len(outcomes) or (positions is not None and len(positions) != len(workloads)):
            raise ValueError("one outcome (and position) per workload")
        self._workloads, self._outcomes, self._positions = workloads, outcomes, positions
        self._made: tuple[PendingReason, ...] | None = None
        self._at: dict[int, int] | None = None

    def __len__(self) -> int:
        return len(self._workloads)

    def __getitem__(self, at):  # noqa: ANN001, ANN204 - int or slice, as a tuple's
        if self._made is not None:
            return self._made[at]
        if isinstance(at, slice):
            return tuple(self._make(i) for i in range(*at.indices(len(self._workloads))))
        if at < 0:
            at += len(self._workloads)
        if not 0 <= at < len(self._workloads):
            raise IndexError("reason index out of range")
        return self._make(at)

    def __iter__(self) -> Iterator[PendingReason]:
        return iter(self.made())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Reasons):
            return (
                self.ids() == other.ids()
                and self._outcomes == other._outcomes
                and self.positions() == other.positions()
            )
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self.made() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.made())

    def __repr__(self) -> str:
        return f"Reasons({self.made()!r})"

    def positions(self) -> list[int]:
        if self._positions is not None:
            return self._positions
        return list(range(1, len(self._workloads) + 1))

    def ids(self) -> list[int]:
        """The explained workload ids, in order (no objects made)."""
        return list(map(_ID, self._workloads))

    def entries(self) -> Iterator[tuple[int, Outcome, int]]:
        """(workload id, outcome, position) per reason, in order, without making any object: for a
        reader of all of them that keeps only a few (the live pass stores what changed)."""
        return zip(map(_ID, self._workloads), self._outcomes, self.positions(), strict=True)

    def get(self, workload_id: int) -> PendingReason | None:
        """The reason of one workload, or None, without making the others."""
        if self._at is None:
            self._at = {workload.id: at for at, workload in enumerate(self._workloads)}
        at = self._at.get(workload_id)
        return None if at is None else self[at]

    def made(self) -> tuple[PendingReason, ...]:
        """Every reason as an object, made once (in bulk: see ``Draft``; with no cyclic garbage
        collection meanwhile, as in a pass: the new objects hold no cycles, and a full collection
        triggered by them would walk the whole snapshot)."""
        if self._made is None:
            positions = self._positions if self._positions is not None else 1
            collecting = gc.isenabled()
            gc.disable()
            try:
                self._made = tuple(make_reasons(self.ids(), self._outcomes, positions))
            finally:
                if collecting:
                    gc.enable()
        return self._made

    def _make(self, at: int) -> PendingReason:
        position = self._positions[at] if self._positions is not None else at + 1
        return make_reason(self._workloads[at].id, self._outcomes[at], position)


def make_reasons(
    workload_ids: Sequence[int], outcomes: Sequence[Outcome], positions: int | Sequence[int]
) -> list[PendingReason]:
    """One reason per (id, outcome), at ``positions`` (an int: that one, the next, and so on)."""
    drafts: list[Draft] = []
    append = drafts.append
    if isinstance(positions, int):
        positions = range(positions, positions + len(workload_ids))
    for workload_id, outcome, position in zip(workload_ids, outcomes, positions, strict=True):
        draft = Draft()
        draft.workload_id = workload_id
        draft.code, draft.params, draft.message, draft.estimated_start = outcome
        draft.position = position
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


def article(number: int) -> str:
    """ "an" before a number read with a vowel sound ("an 8-GPU job", "an 11-GPU job"), else "a"."""
    return "an" if str(number).startswith("8") or number in (11, 18) else "a"


def gpus_phrase(gpus: int, kind: str = "") -> str:
    """ "1 GPU", "8 GPUs", "8 x H100 GPUs": researchers read these sentences, so the plural is right."""
    return f"{gpus}{kind} GPU" if gpus == 1 else f"{gpus}{kind} GPUs"


def outcome(code: ReasonCode, message: str, estimate: float | None = None, **params: object) -> Outcome:
    if estimate == float("inf"):
        estimate = None
    return (code, MappingProxyType(params), message, estimate)


FIRST_IN_LINE = (
    "waiting for GPUs: the free ones went to workloads ranked ahead of yours that started in this pass; "
    "yours is first in line"
)


def workloads_ahead(ahead: int) -> str:
    """ "1 workload is", "3 workloads are": researchers read these sentences."""
    return "1 workload is" if ahead == 1 else f"{ahead} workloads are"


def fair_share_queued(ahead: int, allocation: str, ratio: float) -> Outcome:
    """Ranked behind others by fair share; with nothing pending ahead it simply waits for GPUs,
    and says so (never "0 workloads ... ahead")."""
    if ahead == 0:
        message = FIRST_IN_LINE
    else:
        if ratio == float("inf"):
            standing = "is unfunded"
        elif ratio == 0:
            standing = "has used none of its share yet"
        else:
            standing = f"is at {ratio:.2f}x its share"
        message = (
            f"{workloads_ahead(ahead)} ahead of yours, from allocations further below their budget; "
            f"{allocation} {standing}"
        )
    return outcome(ReasonCode.FAIR_SHARE_QUEUED, message, ahead=ahead, allocation=allocation, ratio=ratio)


def queued_in_order(ahead: int, ordering: str) -> Outcome:
    message = FIRST_IN_LINE if ahead == 0 else f"{workloads_ahead(ahead)} ahead of yours in {ordering} order"
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


def kept_for_short_work(shape: Shape, node_size: int, lane: int) -> Outcome:
    message = (
        f"waiting for {describe_shape(shape, node_size)}: the last {lane} free"
        f" {'GPU is' if lane == 1 else 'GPUs are'} kept for short work (debug and interactive jobs)"
    )
    return outcome(
        ReasonCode.WAITING_FOR_GPUS, message, gpus=shape[0], gpu_type=shape[2], kept_for_short=lane
    )


def protected_work(until: float) -> Outcome:
    message = f"waiting for GPUs: the work it could replace is protected by its minimum runtime until {clock(until)}"
    return outcome(ReasonCode.PROTECTED_WORK, message, until, protected_until=until)


def waiting_for_checkpoint(at: float) -> Outcome:
    message = (
        f"waiting for GPUs: the work it could replace saves its progress at ~{clock(at)}; "
        "taken sooner, it would lose what it did since its last checkpoint"
    )
    return outcome(ReasonCode.WAITING_FOR_GPUS, message, at, checkpoint_at=at)


def reserved_for(workload: PendingWorkload, start_at: float | None) -> Outcome:
    message = f"nodes are held for {article(workload.gpus)} {workload.gpus}-GPU job that starts at ~{clock(start_at)}"
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
