"""What a budget tree fixes for every pass over it (``TreeShape``), kept per tree in a planning
session, and the fair-share ratios a plan reports, worked out when first read (``LazyRatios``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from scheduling.policy.memo import PerSource
from scheduling.policy.types import AllocationPath, BudgetNodeSpec

ROOT = ""
INFINITE = math.inf


class LazyRatios(Mapping[AllocationPath, float]):
    """``shape.fair_share_ratios(usage)``, worked out when first read (then kept). It holds the
    shape, not the tree: a plan kept unread keeps nothing of its pass alive."""

    def __init__(self, shape: TreeShape, usage: dict[AllocationPath, float]) -> None:
        self._shape: TreeShape | None = shape
        self._usage = usage
        self._ratios: dict[AllocationPath, float] = {}

    def _worked_out(self) -> dict[AllocationPath, float]:
        shape = self._shape
        if shape is not None:
            self._ratios = shape.fair_share_ratios(self._usage)
            self._shape = None
        return self._ratios

    def __getitem__(self, path: AllocationPath) -> float:
        return self._worked_out()[path]

    def __iter__(self) -> Iterator[AllocationPath]:
        return iter(self._worked_out())

    def __len__(self) -> int:
        return len(self._worked_out())

    def __repr__(self) -> str:
        return repr(self._worked_out())


class TreeShape:
    """What a budget tree fixes for every pass over it: parents, budgets, name-sorted children,
    limits, sibling budget totals, the funded paths and each path's ancestors. Read-only once built."""

    def __init__(self, tree: Iterable[BudgetNodeSpec], extra_allocations: Iterable[AllocationPath]) -> None:
        self.parent: dict[AllocationPath, AllocationPath] = {}
        self.budget: dict[AllocationPath, float] = {ROOT: 0.0}
        self.children: dict[AllocationPath, list[AllocationPath]] = {ROOT: []}
        self.limit: dict[AllocationPath, int] = {}
        for spec in tree:
            self._add(spec.path, spec.parent or ROOT, max(spec.budget, 0.0), spec.concurrency_limit)
        for path in extra_allocations:  # charged to a node the tree does not know: unfunded
            if path not in self.budget:
                self._add(path, ROOT, 0.0, None)
        for path in list(self.parent):
            if self.parent[path] not in self.budget:  # orphan: hang it under the root
                self.parent[path] = ROOT
        for path, parent in self.parent.items():
            self.children[parent].append(path)
        for names in self.children.values():
            names.sort()
        self.sibling_budget = {
            parent: sum(self.budget[s] for s in names) for parent, names in self.children.items()
        }
        self.funded = self._funded_paths()
        self.funded_sorted = sorted(self.funded)
        self.ancestors = {path: self._ancestors(path) for path in self.budget}
        # path -> the slots (places in ``budget``'s order) of its ancestors (the root is not one)
        slot_of = {path: slot for slot, path in enumerate(self.budget)}
        self.slots = {path: tuple(map(slot_of.__getitem__, chain)) for path, chain in self.ancestors.items()}
        self.parting: dict[tuple[AllocationPath, AllocationPath], tuple] = {}

    def level_ratio(
        self,
        path: AllocationPath,
        sibling_usage: dict[AllocationPath, float] | None,
        usage: Mapping[AllocationPath, float],
    ) -> float:
        """``FairTree.level_ratio`` over the subtree usage ``usage``."""
        parent = self.parent.get(path, ROOT)
        total_budget = self.sibling_budget[parent]
        total_usage = sibling_usage.get(parent) if sibling_usage is not None else None
        if total_usage is None:
            total_usage = sum(usage[s] for s in self.children[parent])
            if sibling_usage is not None:
                sibling_usage[parent] = total_usage
        used = usage[path] / total_usage if total_usage > 0 else 0.0
        share = self.budget[path] / total_budget if total_budget > 0 else 0.0
        if share == 0:
            return INFINITE if used > 0 else 0.0
        return used / share

    def fair_share_ratios(self, usage: Mapping[AllocationPath, float]) -> dict[AllocationPath, float]:
        """``FairTree.fair_share_ratios`` over the subtree usage ``usage``."""
        totals: dict[AllocationPath, float] = {}  # each sibling set summed once, not once per sibling
        return {path: self.level_ratio(path, totals, usage) for path in self.funded_sorted}

    def _add(self, path: AllocationPath, parent: AllocationPath, budget: float, limit: int | None) -> None:
        self.parent[path] = parent
        self.budget[path] = budget
        self.children.setdefault(path, [])
        if limit is not None:
            self.limit[path] = limit

    def _funded_paths(self) -> frozenset[AllocationPath]:
        funded: set[AllocationPath] = set()
        stack = [child for child in self.children[ROOT] if self.budget[child] > 0]
        while stack:
            path = stack.pop()
            funded.add(path)
            stack.extend(child for child in self.children[path] if self.budget[child] > 0)
        return frozenset(funded)

    def _ancestors(self, path: AllocationPath) -> tuple[AllocationPath, ...]:
        """The path itself, then each ancestor up to (not including) the root."""
        chain = []
        while path != ROOT and path in self.parent:
            chain.append(path)
            path = self.parent[path]
        return tuple(chain)


SHAPES_KEPT = 8  # per tree: the base and the last few sets of extra allocations


def shape_of(
    tree: Iterable[BudgetNodeSpec],
    extra_allocations: Iterable[AllocationPath],
    kept: PerSource[dict[frozenset, TreeShape]] | None,
) -> TreeShape:
    """The tree's shape with ``extra_allocations`` it lacks hung under the root (unfunded): from
    ``kept`` (a session's: tree tuple -> its shapes, one per set of extra allocations) when given."""
    if kept is None or not isinstance(tree, tuple):
        return TreeShape(tree, sorted(set(extra_allocations)))
    shapes = kept.get(tree, dict)
    base = shapes.get(frozenset())
    if base is None:
        base = shapes[frozenset()] = TreeShape(tree, ())
    missing = frozenset(extra_allocations).difference(base.budget)
    if not missing:
        return base
    shape = shapes.get(missing)
    if shape is None:
        if len(shapes) >= SHAPES_KEPT:  # keep the base, drop the oldest other
            shapes.pop(next(key for key in shapes if key))
        shape = shapes[missing] = TreeShape(tree, sorted(missing))
    return shape
