"""The order of the nodes by when each is wholly free, carried from pass to pass (reservation.py).

Whole nodes of one size (the usual gang, or one whole node) are picked from an order carried in
the planning session (``ReleaseOrder``): per domain, the nodes sorted by (time wholly free, name)
as their release keys say (``release_key``), the time not clamped to ``now``. Clamping keeps that
order except that every node free by ``now`` ties at ``now`` and goes by name, so the earliest k
are read off it (``first_nodes``).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, repeat
from operator import is_not, itemgetter
from typing import TYPE_CHECKING, cast

from scheduling.policy.rules import release_at
from scheduling.policy.types import ClusterNodeSpec, RunningWorkload

if TYPE_CHECKING:
    from scheduling.policy.node_keys import ReleaseKeys
    from scheduling.policy.reservation import ReleaseProfile
    from scheduling.policy.session import PlanningSession

INFINITE = math.inf
_TIME, _NAME = itemgetter(0), itemgetter(1)


UNKNOWN = object()
UNSEEN = object()  # a node not in a carried order (yet, or any more)
NEVER = (INFINITE,)  # sorts before every (inf, name) and after every (finite time, name)


def first_nodes(
    timed: list[tuple[float, str]], count: int, now: float
) -> tuple[float, tuple[str, ...]] | None:
    """(start, names) of the ``count`` earliest of ``timed`` (sorted (time, name), times not
    clamped to ``now``), as sorting them by (max(time, now), name) would pick them: the nodes
    free by ``now`` all tie at ``now`` and go by name; the others come after them by (time, name).
    None when fewer than ``count`` are ever free."""
    if len(timed) < count or timed[count - 1][0] == INFINITE:
        return None
    return pick_nodes(timed, count, now)


def pick_nodes(timed: list[tuple[float, str]], count: int, now: float) -> tuple[float, tuple[str, ...]]:
    """``first_nodes`` of ``timed`` that has at least ``count`` finite times."""
    ready = bisect_right(timed, now, key=_TIME)
    if ready >= count:
        return now, tuple(sorted(map(_NAME, timed[:ready]))[:count])
    return timed[count - 1][0], tuple(sorted(map(_NAME, timed[:count])))


class Kind:
    """The candidates for one GPU type (None: any) among a profile's nodes, in their order."""

    def __init__(self, nodes: list[ClusterNodeSpec]) -> None:
        self.nodes = nodes
        sizes = {node.gpus for node in nodes}
        self.largest = max(sizes, default=None)
        self.size = sizes.pop() if len(sizes) == 1 else None  # the one size of them all
        members: dict[str, list[ClusterNodeSpec]] = {}
        for node in nodes:
            members.setdefault(node.domain, []).append(node)
        self.domains = list(members)  # in order of first appearance
        self.members = list(members.values())


class Layout:
    """What a profile reads off its nodes alone (``by_name``: the healthy nodes it covers)."""

    def __init__(self, by_name: dict[str, ClusterNodeSpec]) -> None:
        self.by_name = by_name
        self.kinds: dict[str | None, Kind] = {}

    def kind(self, gpu_type: str | None) -> Kind:
        kind = self.kinds.get(gpu_type)
        if kind is None:
            kind = self.kinds[gpu_type] = Kind(
                [node for node in self.by_name.values() if gpu_type in (None, node.gpu_type)]
            )
        return kind


def layout_of(
    nodes: Iterable[ClusterNodeSpec],
    free: Mapping[str, int],
    source: tuple | None,
    session: PlanningSession | None,
) -> Layout:
    """The layout of ``nodes`` that are in ``free``; kept per ``source`` tuple (the nodes are its
    healthy ones) in ``session`` as long as ``free`` covers exactly those."""
    if type(source) is tuple:
        if session is None:
            layout = Layout({node.name: node for node in source if node.healthy})
        else:
            layout = session.layouts.get(
                source, lambda: Layout({node.name: node for node in source if node.healthy})
            )
        if layout.by_name.keys() == free.keys():
            return layout
    return Layout({node.name: node for node in nodes if node.name in free})


class Ranks:
    """The candidates of one kind, per domain, sorted by when each is wholly free as its key in
    ``keys`` says (``release_key``): (time, name), the time not clamped to ``now``. Kept in step with
    ``keys`` by identity: a key the caller dropped or replaced is a node to sort again. Nodes
    whose key does not settle it (None) are in ``unsettled``, not in the order; nodes without
    a key (changed by a pass before their key was worked out) are in neither, but ``pending``.

    Keys that log the nodes they drop (``filing.ReleaseKeys``) are looked up only for the nodes
    logged since the last look and the pending ones: a key is only ever written where there is
    none (here and in ``ReleaseProfile._wholes``), so every other node's key is the one it is
    sorted by. Other keys (and a new log) are looked up for every node."""

    def __init__(self, kind: Kind, preemptive: bool) -> None:
        self.kind = kind
        self.names = [node.name for members in kind.members for node in members]
        self.where = {name: at for at, name in enumerate(self.names)}
        self.domain_of = [at for at, members in enumerate(kind.members) for _ in members]
        self.size = [node.gpus for members in kind.members for node in members]
        self.index = 0 if preemptive else 1  # which time of a key counts
        self.seen: list = [UNSEEN] * len(self.names)  # the key each node is sorted by (or not)
        self.listed: list[list[tuple[float, str]]] = [[] for _ in kind.members]
        self.unsettled: set[str] = set()
        self.pending: set[int] = set(range(len(self.names)))  # where seen is UNSEEN
        self.read: tuple[int, int] | None = None  # (epoch, length) of the keys' log when last read

    def synced(
        self, profile: ReleaseProfile, keys: dict[str, tuple[float, float] | None]
    ) -> list[list[tuple[float, str]]]:
        """The order per domain, after sorting again the nodes whose key changed (the lists
        themselves: not to be changed). Keys missing for nodes the profile did not change are
        worked out and kept, as ``_wholes`` does."""
        names, seen = self.names, self.seen
        dropped = getattr(keys, "dropped", None)
        # keys with a "dropped" log are filing.ReleaseKeys, which carry an epoch
        read, self.read = (
            self.read,
            None if dropped is None else (cast("ReleaseKeys", keys).epoch, len(dropped)),
        )
        if read is None or read[0] != cast("ReleaseKeys", keys).epoch:
            current = list(map(keys.get, names, repeat(UNKNOWN)))
            moved = [(at, current[at]) for at in compress(range(len(names)), map(is_not, current, seen))]
        else:
            where, get = self.where, keys.get
            looked = self.pending.union(where[name] for name in dropped[read[1] :] if name in where)  # type: ignore[index]  # read epoch matches: keys is a ReleaseKeys
            moved = [(at, key) for at in sorted(looked) if (key := get(names[at], UNKNOWN)) is not seen[at]]
        listed, index, changed, pending = self.listed, self.index, profile.changed, self.pending
        for at, key in moved:
            name, old = names[at], seen[at]
            timed = listed[self.domain_of[at]]
            if old is None:
                self.unsettled.discard(name)
            elif old is not UNSEEN:
                del timed[bisect_left(timed, (old[index], name))]
            if key is UNKNOWN and name not in changed:
                left, here = profile._state(name)
                key = keys[name] = release_key(name, self.size[at], left, here)
            if key is UNKNOWN:  # changed in this pass: looked at again next time
                seen[at] = UNSEEN
                pending.add(at)
                continue
            pending.discard(at)
            if key is None:
                seen[at] = None
                self.unsettled.add(name)
            else:
                seen[at] = key
                insort(timed, (key[index], name))  # type: ignore[index]  # UNKNOWN (object() sentinel) skipped above
        return listed


class ReleaseOrder:
    """The nodes in release order per kind, carried from pass to pass (in a planning session)
    while the release keys (the filing's, see filing.py), the layout and the rule (preemptive or
    not) stay the same."""

    def __init__(self, keys: dict, layout: Layout, preemptive: bool) -> None:
        self.keys, self.layout, self.preemptive = keys, layout, preemptive
        self.kinds: dict[Kind, Ranks] = {}  # the layout holds the kinds (compared by identity)

    def ranks(self, kind: Kind) -> Ranks:
        ranks = self.kinds.get(kind)
        if ranks is None:
            ranks = self.kinds[kind] = Ranks(kind, self.preemptive)
        return ranks


def release_key(
    name: str, size: int, left: int, here: Sequence[RunningWorkload] | None
) -> tuple[float, float] | None:
    """What decides when ``name`` is wholly free, from its occupants alone (``now`` aside):
    (latest of the funded work's min(expected end, protected until), latest expected end), so
    that it is wholly free at max(now, the first) when waiters may preempt, else at max(now, the
    second) (``release_at``, clamped as ``_wholes`` clamps it); (inf, inf) when its work holds
    less than it lacks (never); None when that does not settle it (work it out in full)."""
    if not (0 <= left < size and here):
        return None
    total, preempting, declared = left, -INFINITE, -INFINITE
    for workload in here:
        # release_at with no "now" to clamp to: the caller clamps (see ``_whole_from_key``)
        held = release_at(workload, -INFINITE, True)
        if held > preempting:
            preempting = held
        end = release_at(workload, -INFINITE, False)
        if end > declared:
            declared = end
        for placed, gpus in workload.placement:
            if placed == name:
                if gpus <= 0:
                    return None
                total += gpus
    if total == size:
        return (preempting, declared)
    return (INFINITE, INFINITE) if total < size else None
