"""Fair Tree ranking over the budget tree (DESIGN 5 step 3), with budgets as the shares.

Level fair share, per sibling set (children of one node)::

    S  = budget / sum(sibling budgets)         in [0, 1]   (share of the parent's funding)
    U  = usage  / sum(sibling usage)           in [0, 1]   (share of the parent's usage)
    LF = S / U                                 in [0, inf]

LF > 1: under-served, LF < 1: over-served. Edge cases: U == 0 gives LF = inf (nothing used yet is
never "over"), which is not a bug; S == 0 gives LF = 0 (unfunded). Because ``sum(S)`` and
``sum(U)`` are common to all siblings, sorting by LF is sorting by ``budget / usage`` and the policy
compares that (no division by a zero sum). Ties: larger S first, then the name (ascending).

Order: siblings by LF descending, walked depth first (a node's own pending work before its
children's), so every workload of an under-served subtree ranks before every workload of an
over-served sibling subtree. Inside an allocation, users share it equally, so the user with the
least usage goes first (ties by user name); inside a user, submit time then id.

Usage is the caller's windowed or decayed GPU-seconds plus a *projected charge*: a running
workload still owes ``gpus * max(0, projected_charge_s - (now - started_at))`` and admitting a
workload in this pass charges ``gpus * projected_charge_s``. Running work and admissions are thus
charged alike, so one pass never hands everything to the single most under-served allocation and
the next pass starts from the standing this pass ended with (no flip-flop between passes).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import neg

from scheduling.policy.filing import in_start_order
from scheduling.policy.memo import PerSource
from scheduling.policy.rules import FairTreeKey, fair_tree_key, may_take_from
from scheduling.policy.tree_shape import ROOT, LazyRatios, TreeShape, shape_of
from scheduling.policy.types import AllocationPath, BudgetNodeSpec, RunningWorkload

INFINITE = math.inf
_BELOW_EVERY_KEY = (-1.0, -1.0)  # every key ranks before it (a NaN ratio aside)


class _MadeOnFirstRead:
    """A usage attribute of ``FairTree``, made (with the others) by ``FairTree._settle`` the first
    time it is read. A non-data descriptor: once made, the tree's own attribute shadows it, so
    later reads cost what any attribute read costs."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, tree: FairTree | None, owner: type | None = None) -> object:
        if tree is None:
            return self
        tree._settle()
        return tree.__dict__[self.name]


class FairTree:
    """Budget tree with rolled-up usage; cheap to re-rank after a charge.

    The usage (``subtree_usage``, ``user_usage``, ``user_log``) is made when first read: many
    passes read none of it, so they neither copy the users' usage nor charge the running work
    (``charge_running`` keeps what to charge until then). Made later, it is made the same: the
    same additions in the same order, before any charge that follows."""

    # node -> its subtree's usage, the running work's projected charge and this pass's charges
    subtree_usage: dict[AllocationPath, float] = _MadeOnFirstRead()  # type: ignore[assignment]
    # (path, user) -> that user's usage, charged likewise
    user_usage: dict[tuple[AllocationPath, str], float] = _MadeOnFirstRead()  # type: ignore[assignment]
    # path -> the users whose usage a charge changed, in order (queues follow it: queues.py)
    user_log: dict[AllocationPath, list[str]] = _MadeOnFirstRead()  # type: ignore[assignment]

    def __init__(
        self,
        tree: Iterable[BudgetNodeSpec],
        usage: Mapping[AllocationPath, float],
        user_usage: Mapping[tuple[AllocationPath, str], float],
        extra_allocations: Iterable[AllocationPath] = (),
        shapes: PerSource[dict[frozenset, TreeShape]] | None = None,
    ) -> None:
        """``shapes``: a planning session's shapes of the trees it saw (None: worked out here)."""
        shape = self._shape = shape_of(tree, extra_allocations, shapes)
        self.parent: dict[AllocationPath, AllocationPath] = shape.parent
        self.budget: dict[AllocationPath, float] = shape.budget
        self.children: dict[AllocationPath, list[AllocationPath]] = shape.children
        self.limit: dict[AllocationPath, int] = shape.limit
        self.sibling_budget: dict[AllocationPath, float] = shape.sibling_budget
        self.version = 0  # bumped by every change of usage (queues.py keeps a descent while it holds)
        self.funded: frozenset[AllocationPath] = shape.funded
        self.ancestors: dict[AllocationPath, tuple[AllocationPath, ...]] = shape.ancestors
        self.funded_sorted: list[AllocationPath] = shape.funded_sorted
        # (victim, preemptor) -> where their paths part, with the budgets there (ranks_at_or_below),
        # kept with the shape
        self.parting: dict[tuple[AllocationPath, AllocationPath], tuple] = shape.parting
        subtree = dict.fromkeys(self.budget, 0.0)
        self._charge_usage(subtree, usage)
        # The ratios of the standing the pass starts from, worked out only if read (the simulator
        # never reads them): from a copy, since the pass charges the tree's own usage as it goes.
        self.base_ratio: Mapping[AllocationPath, float] = LazyRatios(shape, dict(subtree))
        # What _settle makes the usage from: subtree usage, the users' usage (copied then) and the
        # running work to charge, as charge_running got it.
        self._unsettled: tuple[dict, Mapping, list] | None = (subtree, user_usage, [])

    def _charge_usage(
        self, subtree: dict[AllocationPath, float], usage: Mapping[AllocationPath, float]
    ) -> None:
        """``charge(path, None, amount)`` for each entry, in order (the bulk form of ``charge``: a pass charges every
        allocation's usage), summed by slot as ``_charge_running`` sums. A path the tree lacks is
        charged to the root only."""
        totals, slots = list(subtree.values()), self._shape.slots
        root = subtree[ROOT]
        for path, amount in usage.items():
            for slot in slots[path] if path in slots else ():  # noqa: SIM401 (see _charge_running)
                totals[slot] += amount
            root += amount
        subtree.update(zip(self._shape.budget, totals, strict=True))
        subtree[ROOT] = root

    def _settle(self) -> None:
        """Make the usage attributes: the usage given, then the running work charged in the order
        ``charge_running`` was called. Only the first read of one of them calls this."""
        assert self._unsettled is not None  # only the first read settles
        subtree, user_usage, running_charges = self._unsettled
        self._unsettled = None
        users = user_usage.copy() if type(user_usage) is dict else dict(user_usage)
        self.subtree_usage, self.user_usage, self.user_log = subtree, users, {}
        for running, now, projected_charge_s, ordered in running_charges:
            self._charge_running(running, now, projected_charge_s, ordered)

    # -- usage ---------------------------------------------------------------------------------
    def charge(self, path: AllocationPath, user: str | None, amount: float) -> None:
        """Add ``amount`` GPU-seconds to ``path``, its ancestors and (when given) its user."""
        self.version += 1
        node = path if path in self.budget else ROOT
        while True:
            self.subtree_usage[node] = self.subtree_usage.get(node, 0.0) + amount
            if node == ROOT:
                break
            node = self.parent.get(node, ROOT)
        if user is not None:
            key = (path, user)
            self.user_usage[key] = self.user_usage.get(key, 0.0) + amount
            log = self.user_log.get(path)
            if log is None:
                self.user_log[path] = [user]
            else:
                log.append(user)

    def charged_usage(self, path: AllocationPath, amount: float) -> dict[AllocationPath, float]:
        """node -> the usage ``charge(path, _, amount)`` would give it, for ``path``'s chain (the
        same additions ``charge`` makes, without making them): the chain is ``ancestors[path]``
        (none for a path the tree lacks), then the root, each a key of ``subtree_usage``."""
        subtree = self.subtree_usage
        charged = {node: subtree[node] + amount for node in self.ancestors.get(path, ())}
        charged[ROOT] = subtree[ROOT] + amount
        return charged

    def charge_running(
        self,
        running: Iterable[RunningWorkload],
        now: float,
        projected_charge_s: float,
        ordered: Callable[[Sequence[RunningWorkload]], bool] = in_start_order,
    ) -> None:
        """Charge each running workload what it still owes (``gpus * max(0, left)``), in the
        order given: the same additions ``charge`` would make, one workload after another. Made
        when the usage is first read (at once if it was), from ``running`` as it is now.
        ``ordered``: tells whether a sequence lies in start order (a session's carry knows it)."""
        self.version += 1
        if self._unsettled is None:
            self._charge_running(running, now, projected_charge_s, ordered)
        else:
            self._unsettled[2].append((tuple(running), now, projected_charge_s, ordered))

    def _charge_running(
        self,
        running: Iterable[RunningWorkload],
        now: float,
        projected_charge_s: float,
        ordered: Callable[[Sequence[RunningWorkload]], bool],
    ) -> None:
        # The bulk form of ``charge`` (a pass charges every running workload): the same additions,
        # in order, to each node along each path's ancestors, then the root; the sums are kept per
        # node slot (the shape's order of the nodes, that of ``subtree``) and written back at the end.
        subtree, shape = self.subtree_usage, self._shape
        totals, slots = list(subtree.values()), shape.slots
        root = subtree[ROOT]
        user_usage, user_log = self.user_usage, self.user_log
        for workload in _still_owing(running, now, projected_charge_s, ordered):
            left = projected_charge_s - (now - workload.started_at)
            if not left > 0.0:  # max(0.0, left) == 0.0: owes nothing
                continue
            owed = workload.gpus * left
            if not owed:
                continue
            path = workload.allocation
            for slot in slots[path] if path in slots else ():  # noqa: SIM401 (not in the tree: root only)
                totals[slot] += owed
            root += owed
            user = workload.user
            if user is None:
                continue
            key = (path, user)
            user_usage[key] = (user_usage[key] if key in user_usage else 0.0) + owed  # noqa: SIM401
            if path in user_log:
                user_log[path].append(user)
            else:
                user_log[path] = [user]
        subtree.update(zip(shape.budget, totals, strict=True))
        subtree[ROOT] = root

    # -- ranking -------------------------------------------------------------------------------
    def key(self, path: AllocationPath, charged: Mapping[AllocationPath, float] | None = None) -> FairTreeKey:
        """``path``'s Fair Tree key among its siblings (``rules.fair_tree_key``), from its usage
        now, or from ``charged`` (``charged_usage``) when given."""
        usage = self.subtree_usage if charged is None else charged
        return fair_tree_key(self.budget[path], usage[path])

    def level_ratio(
        self,
        path: AllocationPath,
        sibling_usage: dict[AllocationPath, float] | None = None,
        usage: Mapping[AllocationPath, float] | None = None,
    ) -> float:
        """Fair-share ratio U / S among siblings (0 when nothing was used; inf when unfunded but used).
        ``sibling_usage``: parent -> its children's summed usage, filled as met (for many paths at once).
        ``usage``: the subtree usage to read (default: the tree's own, as it is now)."""
        return self._shape.level_ratio(path, sibling_usage, self.subtree_usage if usage is None else usage)

    def fair_share_ratios(self) -> dict[AllocationPath, float]:
        """U / S per funded node (unfunded nodes have no share, so no ratio), in path order."""
        return self._shape.fair_share_ratios(self.subtree_usage)

    def best_child(
        self, node: AllocationPath, eligible: Mapping[AllocationPath, int]
    ) -> AllocationPath | None:
        """The child of ``node`` with the largest key (``rules.fair_tree_key``) among those with
        ``eligible[child] > 0``; the first of equal keys (the children are in name order)."""
        best, best_key = None, _BELOW_EVERY_KEY
        budget, usage = self.budget, self.subtree_usage
        for child in self.children.get(node, ()):
            if child in eligible and eligible[child] > 0:
                key = fair_tree_key(budget[child], usage[child])
                if key > best_key:
                    best, best_key = child, key
        return best

    def ordered(self, paths: Iterable[AllocationPath]) -> list[AllocationPath]:
        """``paths`` in Fair Tree order (depth first, siblings by key, a node before its children)."""
        wanted = set(paths)
        counts: dict[AllocationPath, int] = {}
        for path in wanted:
            for ancestor in self.ancestors.get(path, (path,)):
                counts[ancestor] = counts.get(ancestor, 0) + 1
        order: list[AllocationPath] = []
        self._walk(ROOT, wanted, counts, order)
        return order

    def _walk(self, node: AllocationPath, wanted: set, counts: dict, order: list) -> None:
        if node in wanted:
            order.append(node)
        children = [child for child in self.children.get(node, ()) if counts.get(child, 0)]
        children.sort(key=lambda child: (*map(neg, self.key(child)), child))
        for child in children:
            self._walk(child, wanted, counts, order)

    def ranks_at_or_below(
        self,
        victim: AllocationPath,
        preemptor: AllocationPath,
        charged: Mapping[AllocationPath, float] | None = None,
    ) -> bool:
        """``rules.may_take_from`` for ``victim``'s and ``preemptor``'s allocations, compared at
        the level where their paths part (the children of their closest common ancestor); True
        when one is the other's ancestor or the same (the user level decides).
        ``charged``: usage that overrides the tree's for the preemptor's chain (``charged_usage``);
        the victim's side never lies on that chain, so only the preemptor's key reads it."""
        pair = (victim, preemptor)
        parting = self.parting.get(pair)
        if parting is None:
            parting = self.parting[pair] = self._parting(victim, preemptor)
        if not parting:
            return True
        victim_node, preemptor_node = parting
        usage, budget = self.subtree_usage, self.budget
        victim_key = fair_tree_key(budget[victim_node], usage[victim_node])
        preemptor_usage = (usage if charged is None else charged)[preemptor_node]
        preemptor_key = fair_tree_key(budget[preemptor_node], preemptor_usage)
        return may_take_from(victim_key, victim_node, preemptor_key, preemptor_node)

    def _parting(self, victim: AllocationPath, preemptor: AllocationPath) -> tuple:
        """(victim's node, preemptor's node) where their paths part, or () when they do not."""
        victim_chain = self.ancestors.get(victim, (victim,))[::-1]
        preemptor_chain = self.ancestors.get(preemptor, (preemptor,))[::-1]
        for victim_node, preemptor_node in zip(victim_chain, preemptor_chain, strict=False):
            if victim_node != preemptor_node:
                return (victim_node, preemptor_node)
        return ()

    def user_key(self, path: AllocationPath, user: str) -> float:
        return self.user_usage.get((path, user), 0.0)


def _still_owing(
    running: Iterable[RunningWorkload],
    now: float,
    projected_charge_s: float,
    ordered: Callable[[Sequence[RunningWorkload]], bool],
) -> Iterable[RunningWorkload]:
    """``running``, or a suffix of it holding every workload that may still owe a charge.

    Work past its projected charge (``projected_charge_s - (now - started_at) <= 0``) is skipped
    by ``charge_running`` anyway, and most running work is. When ``running`` lies in start order
    (the simulator lists it so; ``ordered``, a session's carry, knows it for the tuple the pass filed),
    that test fails for a prefix and holds for the rest: float subtraction is monotone, so the
    first workload that owes is found by bisection, and the skipped prefix contributes no addition
    (the sums keep their order)."""
    if not isinstance(running, tuple | list) or not ordered(running):
        return running
    first = bisect_left(
        running, True, key=lambda workload: projected_charge_s - (now - workload.started_at) > 0.0
    )
    return running[first:] if first else running
