"""What changed in a pass, counted: the memos of a pass are valid while their counter holds.

``generation`` moves whenever capacity, the standing or the reservation changes (every start,
eviction or reservation); ``relief`` only when GPUs may come free or the reservation changes (an
eviction, a reservation, a settling walk), not on a start, which only takes GPUs."""

from __future__ import annotations


class Changes:
    """The two counters of one pass, shared by its parts (planner.py)."""

    __slots__ = ("generation", "relief")

    def __init__(self) -> None:
        self.generation = 0
        self.relief = 0

    def took(self) -> None:
        """GPUs were taken and the standing moved (a start): what read the standing expires."""
        self.generation += 1

    def freed(self) -> None:
        """GPUs may have come free or the reservation changed: every memo expires."""
        self.generation += 1
        self.relief += 1
