"""How many nodes a preemption could clear, per GPU type and size: the cheap bound that rejects
most hopeless preemption attempts for gangs (``Preemptor._surely_hopeless``).

``ClearableNodes`` belongs to one pass and counts per index (the unreserved one and the reserved
one); the first count on the unreserved index starts from what the last pass counted (kept in
the planning session as a ``ClearableCount``) and counts again only the nodes that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import compress
from operator import is_not, or_
from typing import TYPE_CHECKING

from scheduling.policy.placement import FreeIndex

if TYPE_CHECKING:
    from scheduling.policy.session import PlanningSession

NodeNeeds = Callable[[], dict]  # the pass's occupied node -> funded allocations to preempt (or None)
_WHOLE = object()  # a wholly free node's mark while counting


class ClearableNodes:
    """One pass's counts, per index (see ``on``), and the nodes to count again."""

    def __init__(self, session: PlanningSession, nodes: tuple, main_index: FreeIndex) -> None:
        self.session, self.nodes, self.main_index = session, nodes, main_index
        self.states: dict[FreeIndex, _Clearable] = {}

    def on(self, index: FreeIndex, relief: int, node_needs: NodeNeeds) -> dict[tuple[str, int], list]:
        """(GPU type, node size) -> [wholly free nodes, {funded allocations whose unprotected work
        fills a node (nothing else on it may be preempted but unfunded work): such nodes}] on
        ``index``. A node with protected work, or work started at ``now``, is left out.

        Kept while ``relief`` holds: a start only takes GPUs (and its work cannot be preempted in
        this pass), so after starts the counts are still upper bounds, which is all a bound needs.
        Then only the nodes whose occupants changed (``recount``) or that joined or left the
        index (``index.filings``, a reservation) are counted again."""
        state = self.states.get(index)
        if state is not None and state.relief == relief:
            return state.found
        filings = index.filings
        if state is None:
            state = self.states[index] = _Clearable()
            state.filed = len(filings)
            state.relief = relief
            return self._first_count(index, state, node_needs())
        else:
            changed, state.changed = state.changed, set()
            changed.update(filings[state.filed :])
        state.filed = len(filings)
        state.relief = relief
        _count_again(changed, index, node_needs(), state.found, state.contributions)
        return state.found

    def _first_count(self, index: FreeIndex, state: _Clearable, needs: dict) -> dict[tuple[str, int], list]:
        """``on``'s first count on ``index`` in a pass: every node, in the index's order,
        as the loop there counts a node that contributed nothing yet (nothing to take back).

        On the unreserved index, from what the last such count (of an earlier pass, on the same
        nodes tuple) counted, node by node: a node adds what it added then unless its free GPUs
        or its need changed since (most nodes keep both from pass to pass), and only those are
        counted again, as ``on`` counts a changed node. Told by identity (the kept needs
        are the same objects): an equal value made anew is only counted again, to the same. The
        count is the same either way; only entries of no nodes may differ (a carried count drops
        them), which no reader tells apart (a sum over them, or verdicts that are memos)."""
        free, nodes = index.free, self.nodes
        if index is not self.main_index or type(nodes) is not tuple:  # (a list may change in place)
            return count_every_node(index, needs, state.found, state.contributions)
        names, lefts = list(free), list(free.values())
        wanted = list(map(needs.get, names))
        last = self.session.clearable_count
        if last is not None and last.nodes is nodes and last.names == names:
            found, contributions = last.found, last.contributions
            moved = map(is_not, lefts, last.lefts)
            _count_again(
                compress(names, map(or_, moved, map(is_not, wanted, last.needs))),
                index,
                needs,
                found,
                contributions,
            )
            state.found, state.contributions = found, contributions
        else:
            found = count_every_node(index, needs, state.found, state.contributions)
        self.session.clearable_count = ClearableCount(nodes, names, lefts, wanted, found, state.contributions)
        return found

    def recount(self, names: list[str]) -> None:
        """Nodes whose occupants (and free GPUs) changed: count them again at the next relief."""
        for state in self.states.values():
            state.changed.update(names)


def count_every_node(
    index: FreeIndex, needs: dict, found: dict, contributions: dict
) -> dict[tuple[str, int], list]:
    """Every node of ``index`` into ``found`` and ``contributions`` (both empty)."""
    spec = index.spec
    for name, left in index.free.items():
        node = spec.get(name)
        if node is None:
            continue
        size = node.gpus
        if left >= size:
            if left != size or not left:
                continue  # more than a node holds, or a node of no GPUs: not wholly free
            key = (node.gpu_type, size)
            counts = found.get(key)
            if counts is None:
                counts = found[key] = [0, {}]
            contributions[name] = (key, None)
            counts[0] += 1
        else:
            funded = needs.get(name)
            if funded is None:
                continue
            key = (node.gpu_type, size)
            counts = found.get(key)
            if counts is None:
                counts = found[key] = [0, {}]
            contributions[name] = (key, funded)
            counted = counts[1]
            counted[funded] = counted.get(funded, 0) + 1
    return found


class _Clearable:
    """``ClearableNodes.on``'s counts for one index, and what each node adds to them."""

    __slots__ = ("changed", "contributions", "filed", "found", "relief")

    def __init__(self) -> None:
        self.filed = 0  # how much of the index's ``filings`` it has seen
        self.relief = -1
        self.found: dict[tuple[str, int], list] = {}  # (type, size) -> [whole nodes, {needs: nodes}]
        # node -> ((type, size), None when wholly free, else the funded allocations to preempt)
        self.contributions: dict[str, tuple] = {}
        self.changed: set[str] = set()


def _count_again(
    names: Iterable[str], index: FreeIndex, needs: dict, found: dict, contributions: dict
) -> None:
    """Take back what each of ``names`` added to ``found`` and count it again as it is now."""
    free, spec = index.free, index.spec
    for name in names:
        was = contributions.get(name)
        if was is not None:
            counts = found[was[0]]
            if was[1] is None:
                counts[0] -= 1
            else:
                counts[1][was[1]] -= 1
        node = spec.get(name)
        if node is None:
            contributions.pop(name, None)
            continue
        left, size = free[name], node.gpus
        # filed as wholly free when all of it is (a node of no GPUs is not)
        funded = (_WHOLE if left == size and left else None) if left >= size else needs.get(name)
        if funded is None:
            contributions.pop(name, None)
            continue
        key = (node.gpu_type, size)
        counts = found.get(key)
        if counts is None:
            counts = found[key] = [0, {}]
        if funded is _WHOLE:
            contributions[name] = (key, None)
            counts[0] += 1
        else:
            contributions[name] = (key, funded)
            counts[1][funded] = counts[1].get(funded, 0) + 1


class ClearableCount:
    """A pass's first clearable count on its unreserved index, kept in the planning session for the next pass's
    (``ClearableNodes._first_count``): the nodes tuple, the index's nodes in order, each one's
    free GPUs and need as counted, and copies of the counts (less entries of no nodes) and of
    what each node added (the pass goes on changing its own)."""

    __slots__ = ("contributions", "found", "lefts", "names", "needs", "nodes")

    def __init__(
        self, nodes: tuple, names: list, lefts: list, needs: list, found: dict, contributions: dict
    ) -> None:
        self.nodes, self.names, self.lefts, self.needs = nodes, names, lefts, needs
        self.found = {
            key: [whole, {need: count for need, count in counted.items() if count}]
            for key, (whole, counted) in found.items()
        }
        self.contributions = contributions.copy()  # (a clone: see _kept_node_needs)
