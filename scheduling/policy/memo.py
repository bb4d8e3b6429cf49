"""Values derived from an immutable input, kept per input *object* between passes.

A caller that plans one cluster many times (the simulator, start options) passes the same tuples
(budget tree, nodes) until something changes; what a pass derives from them is then built once.
Entries are keyed by ``id()`` and hold the object itself, so an id is never reused while cached; a
new tuple (every live pass reads one) just builds anew. Only the latest few objects are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class ByIdentity(Generic[V]):
    def __init__(self, kept: int = 8) -> None:
        self.kept = kept
        self.entries: dict[int, tuple[object, V]] = {}

    def get(self, source: object, build: Callable[[], V]) -> V:
        """The value for ``source``, built by ``build()`` the first time this object is seen."""
        entry = self.entries.get(id(source))
        if entry is not None and entry[0] is source:
            return entry[1]
        value = build()
        if len(self.entries) >= self.kept:
            self.entries.pop(next(iter(self.entries)))
        self.entries[id(source)] = (source, value)
        return value
