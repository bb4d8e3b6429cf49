"""Why a workload waits, as the admit phase records it (``planner._Pass.consider``) and the
explain phase resolves it into a reason (explaining.py, reasons.py): one named type per cause.

Workloads that wait for the same cause get equal keys (interned by the pass), so each cause is
resolved once. Every key ends in its ``kind``, which keeps keys of different types unequal even
where their other fields agree."""

from __future__ import annotations

from typing import NamedTuple, Union

from scheduling.policy.placement import Shape
from scheduling.policy.types import AllocationPath, WorkloadId


class NoMatchingNodes(NamedTuple):
    """No healthy node of the shape's type and size could ever hold it."""

    shape: Shape
    kind: str = "none"


class NoCapacity(NamedTuple):
    """Not enough free GPUs of its shape, or work ranked ahead took them; ``reserved``: it holds
    the reservation, so it starts when the reserved nodes free up."""

    shape: Shape
    allocation: AllocationPath
    reserved: bool = False
    kind: str = "capacity"


class OverLimit(NamedTuple):
    """Starting it would pass the concurrency limit of ``path``."""

    path: AllocationPath
    kind: str = "limit"


class Attempt(NamedTuple):
    """A preemption attempt that found no victims, as far as its outcome goes: the
    preemptor's shape, allocation, user and priority."""

    shape: Shape
    allocation: AllocationPath
    user: str
    priority: int


class HeldFor(NamedTuple):
    """It may not use the nodes reserved for ``workload_id``, and fits nowhere else."""

    workload_id: WorkloadId
    kind: str = "held_for"


class Unfunded(NamedTuple):
    """Its allocation is unfunded and nothing free is left for unfunded work."""

    allocation: AllocationPath
    kind: str = "unfunded"


PlainKey = Union[NoMatchingNodes, OverLimit, HeldFor, Unfunded, NoCapacity]  # noqa: UP007 - a runtime alias


class CheckProtected(NamedTuple):
    """Its preemption failed: if protected work is what stands in the way (judged when
    explaining, ``Explainer.protected_until``), that is the reason; else ``fallback``."""

    attempt: Attempt
    may_use_reserved: bool
    fallback: PlainKey
    kind: str = "check_protected"


class Protected(NamedTuple):
    """Protected work (minimum runtime) stands in the way until ``until``."""

    until: float
    kind: str = "protected"


OutcomeKey = Union[PlainKey, CheckProtected, Protected]  # noqa: UP007 - a runtime alias
