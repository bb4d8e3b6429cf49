"""Shortcuts of the walk: could anything still queued start, preempt or reserve? A walk that
records nothing leaves a queue as soon as the answer is no (walk.py). Each answer is sound: it
says no only when trying every workload would start, preempt and reserve nothing."""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, cast

from scheduling.policy.placement import Shape
from scheduling.policy.rules import is_protected
from scheduling.policy.types import RunningWorkload

if TYPE_CHECKING:
    from scheduling.policy.pass_state import PassState as _PassBase
else:
    _PassBase = object  # the pass's state is declared for the type checker only (pass_state.py)

_SHAPE = attrgetter("gpus", "gpus_per_node", "gpu_type")
_FITS_FREE, _FITS_RESERVED = 1, 2  # see Shortcuts._shape_fits


class _ShapeFits(dict):
    """shape -> ``where(shape)``, worked out the first time the shape is read (a dict, so a map
    over many workloads of few shapes looks them up in C)."""

    def __init__(self, where: Callable[[Shape], int]) -> None:
        super().__init__()
        self.where = where

    def __missing__(self, shape: Shape) -> int:
        fits = self[shape] = self.where(shape)
        return fits


class Shortcuts(_PassBase):
    """The could-anything-start checks of ``planner._Pass``; they read the pass's state."""

    def _nothing_to_try(self, queue) -> bool:
        """Nothing queued here could start, preempt or reserve: a walk that records nothing skips it."""
        return not self._may_still_reserve(queue) and self._nothing_more_can_start(queue, thorough=True)

    def _nothing_more_can_start(self, queue, thorough: bool = False) -> bool:
        """No allocation still queued here may preempt anyone, and no GPU is free (for anyone).

        ``thorough``: GPUs may be free if none of what is queued here could start on them nor
        reserve nodes. That reads every queued workload's shape, so it is worth it only where the
        rest of the walk would be read for nothing: when the walk records no reasons."""
        free = self.index.free_gpus(None) or self.reserved.free_gpus(None)
        if free and not thorough:
            return False
        if not self._none_may_preempt(queue):
            return False
        return not free or self._none_fits(queue)

    def _none_fits(self, queue) -> bool:
        """No workload queued here can start on free GPUs (unreserved, or reserved ones it may
        backfill) or make a reservation. Limits are ignored (they only stop work from starting).

        Read in queue order and left at the first workload that could start: each distinct shape
        is placed once (``_ShapeFits``), and only a shape that fits reserved GPUs alone needs the
        workload itself (may it backfill them?)."""
        if self._may_still_reserve(queue):
            return False
        fits = _ShapeFits(self._shape_fits)
        for workload in compress(queue.queued(), map(fits.__getitem__, map(_SHAPE, queue.queued()))):
            if fits[_SHAPE(workload)] == _FITS_FREE or self._may_backfill(workload):
                return False
        return True

    def _shape_fits(self, shape: Shape) -> int:
        """Where ``shape`` could start now: on unreserved free GPUs (``_FITS_FREE``), only on
        reserved ones (``_FITS_RESERVED``), or nowhere (0, also when it never could)."""
        if not self._feasible(shape):
            return 0
        if shape not in self.no_fit and self.index.place(shape) is not None:
            return _FITS_FREE
        reserved = self.reserved
        if reserved.spec and shape not in self.no_fit_reserved and reserved.place(shape) is not None:
            return _FITS_RESERVED
        return 0

    def _may_still_reserve(self, queue) -> bool:
        """Nothing is reserved yet and the first workload queued here that cannot start would be."""
        if self.reservation is not None or not self.config.reservation:
            return False
        return not self.fairshare or bool(queue.funded_allocations())

    def _none_may_preempt(self, queue) -> bool:
        """No allocation still queued here may preempt anyone."""
        if not self.config.preemption or self.config.ordering == "fifo":
            return True
        if not self.fairshare:
            lowest = self._preemptible()
            return lowest is None or all(w.priority <= lowest for w in queue.queued())
        waiting = queue.funded_allocations()
        if not waiting:
            return True
        open_groups = cast("list[tuple[str, bool]]", self._preemptible())  # fair share: the groups
        if any(not funded for _, funded in open_groups):
            return not waiting
        return not any(
            victim_allocation == allocation or self.tree.ranks_at_or_below(victim_allocation, allocation)
            for allocation in waiting
            for victim_allocation, _ in open_groups
        )

    def _preemptible(self) -> list[tuple[str, bool]] | int | None:
        """Fair share: the candidate groups (allocation, funded) with work past its protection;
        else the lowest priority of any candidate (None: none). Kept until an eviction (relief)."""
        known = self.preemptible
        if known is not None and known[0] == self.relief:
            return known[1]
        found: list[tuple[str, bool]] | int | None
        if self.fairshare:
            found = [key for key, running in self.candidates.items() if any(map(self._unprotected, running))]
        else:
            found = min((v.priority for running in self.candidates.values() for v in running), default=None)
        self.preemptible = (self.relief, found)
        return found

    def _unprotected(self, workload: RunningWorkload) -> bool:
        return not is_protected(workload, self.now, self.config.contract)

    def _leave_untried(self, queue) -> None:
        """Leave the rest unexamined: one entry for the whole tail, expanded (with reasons from
        their shape and standing) only if this walk turns out to be the last one."""
        self.blocked.append((None, list(queue.remaining_groups())))
