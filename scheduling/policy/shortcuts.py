"""Shortcuts of the walk: could anything still queued start, preempt or reserve? A walk that
records nothing leaves a queue as soon as the answer is no (walk.py). Each answer is sound: it
says no only when trying every workload would start, preempt and reserve nothing."""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import attrgetter

from scheduling.policy.capacity import Capacity
from scheduling.policy.placement import Shape
from scheduling.policy.preempting import Preemptor
from scheduling.policy.reserving import Reserver
from scheduling.policy.rules import is_short, short_width

_SHAPE = attrgetter("gpus", "gpus_per_node", "gpu_type")
_FITS_FREE, _FITS_SHORT, _FITS_RESERVED = 1, 2, 3  # see Shortcuts._shape_fits


class _ShapeFits(dict):
    """shape -> ``where(shape)``, worked out the first time the shape is read (a dict, so a map
    over many workloads of few shapes looks them up in C)."""

    def __init__(self, where: Callable[[Shape], int]) -> None:
        super().__init__()
        self.where = where

    def __missing__(self, shape: Shape) -> int:
        fits = self[shape] = self.where(shape)
        return fits


class Shortcuts:
    """The could-anything-start checks of a pass; they read its capacity, reservation and
    preemptor, and change nothing."""

    def __init__(self, capacity: Capacity, reserver: Reserver, preemptor: Preemptor) -> None:
        self.capacity, self.reserver, self.preemptor = capacity, reserver, preemptor

    def nothing_to_try(self, queue) -> bool:
        """Nothing queued here could start, preempt or reserve: a walk that records nothing skips it."""
        return not self.reserver.may_still_reserve(queue) and self.nothing_more_can_start(
            queue, thorough=True
        )

    def nothing_more_can_start(self, queue, thorough: bool = False) -> bool:
        """No allocation still queued here may preempt anyone, and no GPU is free (for anyone).

        ``thorough``: GPUs may be free if none of what is queued here could start on them nor
        reserve nodes. That reads every queued workload's shape, so it is worth it only where the
        rest of the walk would be read for nothing: when the walk records no reasons."""
        capacity = self.capacity
        free = capacity.index.free_gpus(None) or capacity.reserved.free_gpus(None)
        if free and not thorough:
            return False
        if not self.preemptor.none_may_preempt(queue):
            return False
        return not free or self._none_fits(queue)

    def _none_fits(self, queue) -> bool:
        """No workload queued here can start on free GPUs (unreserved, or reserved ones it may
        backfill) or make a reservation. Limits are ignored (they only stop work from starting).

        Workloads of one allocation and kind get the same answer (``grouping.KIND``), so where the
        queue knows one of each (``alike``) only those are read, else every queued workload. Left
        at the first that could start: each distinct shape is placed once (``_ShapeFits``); only
        a shape that fits somewhere but not for everyone needs the workload itself (is it short
        work? may it backfill reserved GPUs?). As in the walk's ``consider``: a shape that fits
        unreserved GPUs is placed there, so if the lane holds the workload back it waits,
        whether or not reserved GPUs would take it."""
        if self.reserver.may_still_reserve(queue):
            return False
        alike = queue.alike()
        read = queue.queued if alike is None else alike.__iter__
        fits, config = _ShapeFits(self._shape_fits), self.capacity.config
        for workload in compress(read(), map(fits.__getitem__, map(_SHAPE, read()))):
            where = fits[_SHAPE(workload)]
            if where == _FITS_FREE:
                return False
            if where == _FITS_SHORT:
                if is_short(workload, config):
                    return False
            elif self.reserver.may_backfill(workload):
                return False
        return True

    def _shape_fits(self, shape: Shape) -> int:
        """Where ``shape`` could start now: on unreserved free GPUs (``_FITS_FREE``), there only
        as short work because the lane holds other work back (``_FITS_SHORT``), only on reserved
        GPUs (``_FITS_RESERVED``), or nowhere (0, also when it never could, or fits only on
        lane GPUs and is too wide to be short work: ``rules.short_width``)."""
        capacity = self.capacity
        if not capacity.feasible(shape):
            return 0
        if shape not in capacity.no_fit and capacity.index.place(shape) is not None:
            if not capacity.lane_holds_back(shape):
                return _FITS_FREE
            return _FITS_SHORT if short_width(shape[0], capacity.config) else 0
        reserved = capacity.reserved
        if reserved.spec and shape not in capacity.no_fit_reserved and reserved.place(shape) is not None:
            return _FITS_RESERVED
        return 0
