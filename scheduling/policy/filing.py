"""Running work filed for a pass, carried over from the pass before (``planner._Pass._index``).

A pass files every running workload: onto its nodes (occupants, free GPUs, the ``FreeIndex``),
into preemption candidates per (allocation, funded) with the least work lost first, and into the
GPUs used under concurrency limits. A caller that plans one cluster over and over (the simulator,
~50,000 passes a month) passes the same frozen ``RunningWorkload`` objects from pass to pass, in
start order, give or take the few that started or ended since. A planning session's
``FilingCarry`` keeps what the last pass filed, as it was *before that pass changed any of it*, files only the difference and hands
the pass copies, which it changes freely (starts, evictions, reservations); each node's list of
occupants is handed as it is, and the pass replaces a node's list rather than change it, and so
is the index of what was free before the pass, which the pass only reads.

Exactly what filing afresh gives, not an approximation:

- Workloads are told apart by identity (and each workload id may be there once). The running tuple is matched against the last one in
  order: what is not matched is taken off, and what follows the last match is filed at the end,
  so every node's occupants (and work of equal keys among the candidates) stay in the tuple's
  order, however it changed. A large change
  (a live pass reads new objects every time) or a workload id there twice is None: the caller files
  afresh, and the carry starts again from those objects.
- Free GPUs: afresh, each node's size less each placement in turn, clamped at 0; with whole,
  non-negative GPU counts (else not carried) that is ``max(0, size - GPUs placed)``.
- Candidates: resumable work loses 0.0, so it comes first, in id order (kept sorted as it
  changes); the rest loses ``gpus * (now - started_at) > 0`` (gpus > 0, else not carried), which
  moves with ``now``, so it is handed out in start order and the pass sorts it (as afresh, a
  stable sort) only if it reads the order: most passes preempt nothing (``Filed``'s last field).
- Work started at or after ``now`` is no candidate yet; when one becomes one, ``now`` goes back or
  the budget tree's shape changes, the carry is filed anew from its members (a new nodes tuple
  only files the free GPUs anew).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import attrgetter, is_, is_not, length_hint

from scheduling.policy.node_keys import KeptNeeds, ReleaseKeys
from scheduling.policy.placement import FreeIndex
from scheduling.policy.types import ClusterNodeSpec, RunningWorkload

Occupants = dict[str, list[RunningWorkload]]
Candidates = dict[tuple[str, bool], list[RunningWorkload]]
# (occupants, candidates, used, index, start index, release keys, kept node needs, whether the
# candidates are in preemption order: False when the work that is not resumable is in start order)
Filed = tuple[
    Occupants,
    Candidates,
    dict[str, int],
    FreeIndex,
    FreeIndex,
    "ReleaseKeys | None",
    "KeptNeeds | None",
    bool,
]

_BY_ID = attrgetter("id")
_ALLOCATION = attrgetter("allocation")
_DROPPED_KEPT = 4096  # nodes logged by ReleaseKeys.drop before the log starts anew
_FOUND_WITHIN = 8  # a carried tuple starts with one of the last one's first few workloads


def in_start_order(running: Sequence[RunningWorkload]) -> bool:
    """Whether ``running`` lies in start order with finite start times, worked out in full."""
    starts = [workload.started_at for workload in running]
    total = sum(starts)
    return total - total == 0.0 and starts == sorted(starts)  # (a NaN or an infinity: not in order)


class FilingCarry:
    """The last running tuple, its members by workload id and, once a second pass shared them,
    what was filed from them. A planning session owns one (session.py)."""

    def __init__(self) -> None:
        self.running: tuple[RunningWorkload, ...] = ()
        self.members: dict[int, RunningWorkload] | None = None  # by workload id; None: not worked out yet
        self.base: _Base | None = None
        self.shape: tuple[dict, dict] | None = None  # the last pass's (ancestors, limits), see filed
        self.ordered: bool | None = None  # ``running`` in start order (None: not worked out yet)
        self.counts: dict[str, int] | None = None  # allocation -> its workloads in ``running``
        # (tuple, its change since ``running``, its counts): worked out ahead by ``allocations``
        self.early: tuple[tuple, tuple | None, dict[str, int]] | None = None

    def allocations(self, running: tuple[RunningWorkload, ...]) -> Iterable[str]:
        """The allocations of ``running``'s workloads, each once: the last tuple's, changed by
        what is gone and what was added since. That change is kept for ``filed`` (a pass asks in
        ``_rank``, then files the same tuple in ``_index``)."""
        if type(running) is not tuple:
            return set(map(_ALLOCATION, running))
        early = self.early
        if early is not None:
            if early[0] is running:
                return early[2].keys()
            self.members = None  # worked out for a tuple never filed: from the last one again
        change = self._change(running)
        last = self.counts
        if change is None or last is None:
            counts = dict(Counter(map(_ALLOCATION, running)))
        else:
            counts = dict(last)
            gone, added = change
            for workload in gone:
                allocation = workload.allocation
                left = counts[allocation] - 1
                if left:
                    counts[allocation] = left
                else:
                    del counts[allocation]
            for workload in added:
                allocation = workload.allocation
                counts[allocation] = counts.get(allocation, 0) + 1
        self.early = (running, change, counts)
        return counts.keys()

    def in_start_order(self, running: Sequence[RunningWorkload]) -> bool:
        """Whether ``running`` lies in start order (``started_at`` never falls) with finite start
        times. Kept from pass to pass for the tuple this carry last filed (a pass's fair-share
        charge asks after its ``_index`` filed it): a tuple changed by taking workloads off and
        adding some at its end stays in order when what was added is, after what was kept."""
        if self.running is not running:
            return in_start_order(running)
        if self.ordered is None:
            self.ordered = in_start_order(running)
        return self.ordered

    def filed(
        self,
        running: tuple,
        nodes: tuple,
        healthy: list[ClusterNodeSpec],
        capacity: dict[str, int],
        ancestors: dict[str, tuple[str, ...]],
        limit: dict[str, int],
        now: float,
    ) -> Filed | None:
        shape, self.shape = self.shape, (ancestors, limit)
        early, self.early = self.early, None
        if early is not None and early[0] is running:
            change, self.counts = early[1], early[2]
        else:
            if early is not None:
                self.members = None  # worked out for a tuple never filed: from the last one again
            change = self._change(running) if type(running) is tuple else None
            self.counts = None
        if type(nodes) is not tuple:
            change = None
        if change is None:
            self.running, self.members, self.base = running if type(running) is tuple else (), None, None
            self.ordered = None
            return None
        gone, added = change
        self.ordered = self._still_in_order(running, added) if added or gone else self.ordered
        base = self.base
        if base is None or not (base.fits(ancestors, limit, now) and base.advance(gone, added, now)):
            # filed anew from its members; not for a budget tree read anew every pass (its shape
            # is new every time, so a carry would be filed anew every time)
            if shape is None or shape[0] is not ancestors or shape[1] is not limit:
                self.running, self.members, self.base = running, None, None
                return None
            base = _Base(ancestors, limit, now)
            if not base.add_all(running):
                self.running, self.members, self.base = running, None, None
                return None
        if base.nodes is not nodes:
            base.refile(nodes, healthy, capacity)
        self.running, self.base = running, base
        return base.hand_out()

    def _still_in_order(self, running: tuple, added: tuple) -> bool | None:
        """Whether ``running`` (the last tuple less what is gone, then ``added``) is in start order
        with finite start times, from whether the last one was (None: not known)."""
        if self.ordered is not True:
            return None  # (taking work off an unordered tuple may order it: worked out if asked)
        kept = len(running) - len(added)
        latest = running[kept - 1].started_at if kept else -math.inf
        for workload in added:
            started = workload.started_at
            if not (latest <= started and math.isfinite(started)):
                return False
            latest = started
        return True

    def _change(self, running: tuple) -> tuple[list[RunningWorkload], tuple] | None:
        """(workloads gone, in start order; workloads new, in order) since the last tuple, or None
        when that is a large change (new objects, as a live pass reads them) or a workload is
        there twice. ``running`` is matched against the last tuple greedily, by identity: what is
        not matched is gone, and whatever follows the last match is new. That is exact in any
        order: a workload that only moved is taken off and filed again where it now is."""
        last = self.running
        if running is last:
            return [], ()
        if not running or not last or not any(map(is_, last[:_FOUND_WITHIN], repeat(running[0]))):
            return None  # (new objects, say): nothing to carry
        most = 16 + len(running) // 2
        gone: list[RunningWorkload] = []
        at = done = 0  # running[:at] is last[:done] less ``gone``
        while done < len(last):
            mismatch = _first_mismatch(running[at:], last[done:])
            if mismatch is None:  # one of them ran out
                matched = min(len(running) - at, len(last) - done)
                at, done = at + matched, done + matched
                gone += last[done:]
                break
            at, done = at + mismatch, done + mismatch + 1
            gone.append(last[done - 1])
            if len(gone) > most:
                return None
        added = running[at:]
        if len(gone) + len(added) > most:
            return None
        members = self.members
        if members is None:
            members = dict(zip(map(_BY_ID, last), last, strict=True))
            if len(members) != len(last):
                return None
        for workload in gone:
            del members[workload.id]
        new = set(map(_BY_ID, added))
        if len(new) != len(added) or not members.keys().isdisjoint(new):
            self.members = None
            return None
        members.update(zip(map(_BY_ID, added), added, strict=True))
        self.members = members
        return gone, added


class _Base:
    """What a pass files from the running work, before the pass changes anything."""

    def __init__(self, ancestors: dict[str, tuple[str, ...]], limit: dict[str, int], now: float) -> None:
        self.ancestors, self.limit, self.now = ancestors, limit, now
        self.occupants: Occupants = {}
        self.load: dict[str, int] = {}  # node -> GPUs placed on it
        self.used: dict[str, int] = dict.fromkeys(limit, 0)
        # (allocation, funded) -> (resumable candidates in id order, the others in start order)
        self.groups: dict[tuple[str, bool], tuple[list, list]] = {}
        self.waiting: list[RunningWorkload] = []  # started at or after ``now``: no candidates yet
        self.nodes: tuple | None = None
        self.index = FreeIndex()
        # Filled by the passes' release profiles for nodes they did not change, emptied here for a
        # node whenever its occupants change: it depends on nothing else (reservation.py).
        self.release_keys = ReleaseKeys()
        self.kept_needs = KeptNeeds()  # likewise (preempting.py)

    def fits(self, ancestors: dict, limit: dict, now: float) -> bool:
        return ancestors is self.ancestors and limit is self.limit and now >= self.now  # (not NaN)

    def add_all(self, running: tuple) -> bool:
        add = self.add
        return all(map(add, running))

    def advance(self, gone: list[RunningWorkload], added: tuple, now: float) -> bool:
        """Take off what is gone and file what is new, at ``now``; False: file anew instead."""
        remove = self.remove
        for workload in gone:
            remove(workload)
        if self.waiting and any(workload.started_at < now for workload in self.waiting):
            return False  # a candidate now, placed among the others in start order: file anew
        self.now = now
        add = self.add
        return all(map(add, added))

    def add(self, workload: RunningWorkload) -> bool:
        """File ``workload`` (False, filing nothing, for GPU counts the carry cannot sum exactly)."""
        gpus = workload.gpus
        if type(gpus) is not int or gpus <= 0:
            return False
        for _, placed in workload.placement:
            if type(placed) is not int or placed < 0:
                return False
        occupants, load, index, keys = self.occupants, self.load, self.index, self.release_keys
        free, kept = index.free, self.kept_needs
        for name, placed in workload.placement:
            keys.drop(name)
            kept.forget(name)
            here = occupants.get(name)
            if here is None:
                occupants[name] = [workload]
            else:
                here.append(workload)
            total = load[name] = load.get(name, 0) + placed
            if name in free:
                index.set_free(name, max(0, index.spec[name].gpus - total))
        self._count(workload, gpus)
        if workload.started_at < self.now:
            self._enlist(workload)
        else:
            self.waiting.append(workload)
        return True

    def remove(self, workload: RunningWorkload) -> None:
        occupants, load, index, keys = self.occupants, self.load, self.index, self.release_keys
        free, kept = index.free, self.kept_needs
        for name, placed in workload.placement:
            keys.drop(name)
            kept.forget(name)
            here = occupants[name]
            drop_identical(here, workload)
            if not here:
                del occupants[name]
            total = load[name] = load[name] - placed
            if name in free:
                index.set_free(name, max(0, index.spec[name].gpus - total))
        self._count(workload, -workload.gpus)
        if not workload.started_at < self.now:
            drop_identical(self.waiting, workload)
            return
        key = (workload.allocation, workload.funded)
        resumable, others = self.groups[key]
        if workload.resumable:  # found by id first: a group may hold hundreds
            del resumable[_at(resumable, workload, bisect_left(resumable, workload.id, key=_BY_ID))]
        else:
            drop_identical(others, workload)
        if not (resumable or others):
            del self.groups[key]

    def _count(self, workload: RunningWorkload, gpus: int) -> None:
        used = self.used
        if used:
            for path in self.ancestors.get(workload.allocation, ()):
                if path in used:
                    used[path] += gpus

    def _enlist(self, workload: RunningWorkload) -> None:
        key = (workload.allocation, workload.funded)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = ([], [])
        if workload.resumable:
            insort(group[0], workload, key=_BY_ID)  # after equal ids: those started earlier
        else:
            group[1].append(workload)

    def refile(self, nodes: tuple, healthy: list[ClusterNodeSpec], capacity: dict[str, int]) -> None:
        """File the free GPUs of ``nodes`` (its healthy ones, with their sizes) anew."""
        load = self.load
        free = {name: max(0, size - load.get(name, 0)) for name, size in capacity.items()}
        self.index = FreeIndex.filed(healthy, free)
        self.nodes = nodes
        self.release_keys.clear()

    def hand_out(self) -> Filed:
        """Copies for a pass (the pass changes them; this base stays as it is). The candidates that
        are not resumable are in start order: the pass sorts them by work lost at its ``now`` if
        it reads their order (``Filed``)."""
        occupants = self.occupants
        if len(self.release_keys.dropped) > _DROPPED_KEPT:
            self.release_keys.restart()
        return (
            # the lists themselves: a pass changes a node's list only in a copy. (``copy``, not
            # ``dict``: nodes that emptied leave holes, which ``dict`` copies entry by entry.)
            occupants.copy(),
            {key: resumable + others for key, (resumable, others) in self.groups.items()},
            dict(self.used),
            self.index.copy(),
            self.index,  # the start index: read only, by explanations (a copy cost every pass)
            self.release_keys,  # shared: a pass adds only what holds for this base
            self.kept_needs,  # likewise
            False,
        )


def _first_mismatch(ours: tuple, theirs: tuple) -> int | None:
    """Where ``ours`` first holds another object than ``theirs`` does (None: nowhere before the
    shorter one ends). A pass matches every running workload this way: no index is counted, the
    iterator that stopped just past the mismatch tells where it is."""
    rest = iter(ours)
    if not any(map(is_not, rest, theirs)):
        return None
    return len(ours) - length_hint(rest) - 1


def drop_identical(items: list, item: object) -> None:
    """Remove ``item`` itself (not an equal one) from ``items``: frozen dataclasses compare
    field by field, which is slow, and an equal twin is not the same workload."""
    del items[_at(items, item)]


def _at(items: list, item: object, start: int = 0) -> int:
    """Where ``item`` itself is in ``items``."""
    for position in range(start, len(items)):
        if items[position] is item:
            return position
    raise ValueError("not filed")
