"""Values derived from an immutable input, kept per input *object* by a planning session.

A caller that plans one cluster many times (the simulator, start options) passes the same tuples
(budget tree, nodes) until something changes; what a pass derives from them is then built once.
The session keeps the last few objects it saw and the value derived from each, found by
identity (``is``) in a short list: an object equal to a kept one but not the same builds anew, as
every live pass (which reads new tuples) does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class PerSource(Generic[V]):
    """The values derived from the last ``kept`` source objects, the oldest dropped first."""

    __slots__ = ("entries", "kept")

    def __init__(self, kept: int = 8) -> None:
        self.kept = kept
        self.entries: list[tuple[object, V]] = []

    def get(self, source: object, build: Callable[[], V]) -> V:
        """The value for ``source``, built by ``build()`` the first time this object is seen."""
        for kept_source, value in self.entries:
            if kept_source is source:
                return value
        value = build()
        if len(self.entries) >= self.kept:
            del self.entries[0]
        self.entries.append((source, value))
        return value
