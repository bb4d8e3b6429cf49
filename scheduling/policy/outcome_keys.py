"""Why a workload waits, as the admit phase records it (``planner._Pass.consider``) and the
explain phase resolves it into a reason (explaining.py, reasons.py).

Workloads that wait for the same cause get equal keys (interned by the pass), so each cause is
resolved once. Three causes are judged on the pass's final state (``NoCapacity``: were GPUs free
when the pass began, and when will enough be; ``CheckProtected``: is protected work what stands
in the way); every other cause is ``Settled`` when it is recorded: its reason and what the reason
says."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Union

from scheduling.policy.placement import Shape
from scheduling.policy.types import AllocationPath

if TYPE_CHECKING:
    from scheduling.policy.reasons import Outcome


class Settled(NamedTuple):
    """A cause the rest of the pass does not change: ``reason(*args)`` (a function of
    reasons.py) is its outcome, e.g. ``Settled(reasons.over_limit, (path, limit))``."""

    reason: Callable[..., Outcome]
    args: tuple


class NoCapacity(NamedTuple):
    """Not enough free GPUs of its shape, or work ranked ahead took them; ``reserved``: it holds
    the reservation, so it starts when the reserved nodes free up."""

    shape: Shape
    allocation: AllocationPath
    reserved: bool = False


class Attempt(NamedTuple):
    """A preemption attempt that found no victims, as far as its outcome goes: the
    preemptor's shape, allocation, user and priority."""

    shape: Shape
    allocation: AllocationPath
    user: str
    priority: int


class CheckProtected(NamedTuple):
    """Its preemption failed: if protected work is what stands in the way (judged when
    explaining, ``Explainer.protected_until``), that is the reason; else ``fallback``."""

    attempt: Attempt
    may_use_reserved: bool
    fallback: Settled | NoCapacity


OutcomeKey = Union[Settled, NoCapacity, CheckProtected]  # noqa: UP007 - a runtime alias
