"""When GPUs free up: reservations (DESIGN 5 step 6) and estimated starts (DESIGN 6).

A running workload's GPUs are expected back at ``release_at``. When the waiter may preempt
(fair share with preemption on), that is the *drain* rule::

    release_at = now                                          for unfunded work
    release_at = min(expected_end or inf, max(protected_until, now))   for funded work

i.e. the reserved job may take the nodes as soon as what runs there is no longer protected: that is
what lets unprotected work backfill reserved nodes, and the next pass, seeing that backfill, makes
the same reservation again. Without preemption (FIFO, priority) only declared ends count:
``release_at = expected_end or inf``.

For every healthy node the profile keeps, for each count g, the earliest time the node has g free
GPUs. A one-node shape starts at the earliest such time over the nodes (ties by node name); a gang
of k whole nodes at the k-th earliest "wholly free" time within one domain (ties by domain name),
or across domains when no single domain has k nodes. ``inf`` means unknown.

Whole nodes of one size (the usual gang, or one whole node) are picked from an order carried
from pass to pass (``ReleaseOrder``): per domain, the nodes sorted by (time wholly free, name) as their
release keys say, the time not clamped to ``now``. Clamping keeps that order except that every
node free by ``now`` ties at ``now`` and goes by name, so the earliest k are read off it
(``first_nodes``). A pass re-sorts only the nodes whose key changed since (found by identity), and
works out the nodes it changed itself on a copy of their domain's list; without keys (filed
afresh, as a live pass is) every node is worked out as before.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING

from scheduling.policy.placement import Shape
from scheduling.policy.release_order import (
    NEVER,
    UNKNOWN,
    UNSEEN,
    Kind,
    ReleaseOrder,
    first_nodes,
    layout_of,
    pick_nodes,
    release_key,
)
from scheduling.policy.rules import release_at
from scheduling.policy.types import ClusterNodeSpec, RunningWorkload

if TYPE_CHECKING:
    from scheduling.policy.session import PlanningSession

INFINITE = math.inf


class ReleaseProfile:
    """Per node: the earliest time it has g free GPUs, for every g up to its size."""

    def __init__(
        self,
        nodes: Iterable[ClusterNodeSpec],
        free: Mapping[str, int],
        occupants: Mapping[str, Sequence[RunningWorkload]],
        now: float,
        preemptive: bool = True,
        keys: dict[str, tuple[float, float] | None] | None = None,
        changed: Iterable[str] = (),
        source: tuple[ClusterNodeSpec, ...] | None = None,
        session: PlanningSession | None = None,
    ) -> None:
        """``keys``: what earlier profiles worked out per node from its occupants alone (see
        ``release_key``), kept by the caller while those occupants stay; ``changed``: the nodes whose
        occupants changed since (their keys are not read, nor written). ``source``: the tuple
        ``nodes`` were taken from (its healthy ones), when the caller passes the same tuple from
        pass to pass: what is read off it alone is then kept (``Layout``), and with ``keys`` the
        order of the nodes by release time too (``ReleaseOrder``), in ``session`` (None: within
        this profile only).

        A node's free GPUs and occupants are read from ``free`` and ``occupants`` when first
        needed, not copied: the caller changes them only for nodes it then ``refresh``es."""
        self.now = now
        self.preemptive = preemptive
        self.free, self.occupants = free, occupants
        self.session = session
        self.order: ReleaseOrder | None = None  # without a session: this profile's own
        self.layout = layout_of(nodes, free, source, session)
        self.nodes = self.layout.by_name
        self.time_for: dict[str, list[float]] = {}  # made when first asked for (see _times)
        self.whole_at: dict[str, float] = {}  # time_for[name][size], when asked for alone (_whole)
        self.keys = keys
        self.changed = set(changed)

    def refresh(self, names: Iterable[str], free: Mapping[str, int], occupants: Mapping) -> None:
        """Recompute the given nodes (after work started on them or left them). What a node's
        times are made of is read when first asked for: the caller refreshes every node whose
        occupants changed before it asks again (``earliest``)."""
        names = list(names)
        self.changed.update(names)
        self.free, self.occupants = free, occupants
        time_for, whole_at = self.time_for, self.whole_at
        for name in names:
            time_for.pop(name, None)
            whole_at.pop(name, None)

    def _state(self, name: str) -> tuple[int, Sequence[RunningWorkload] | None]:
        """(free GPUs, occupants) of ``name`` now."""
        return self.free[name], self.occupants.get(name)

    def _at(self, node: ClusterNodeSpec, count: int) -> float:
        """The earliest time ``node`` has ``count`` GPUs free."""
        if count == node.gpus:
            return self._wholes((node,))[0]
        times = self.time_for.get(node.name)
        return (self._times(node) if times is None else times)[count]

    def _wholes(self, nodes: Iterable[ClusterNodeSpec]) -> list[float]:
        """``[_times(node)[node.gpus] for node in nodes]`` (``_whole``)."""
        return list(map(self._whole, nodes))

    def _whole(self, node: ClusterNodeSpec) -> float:
        """When ``node`` is wholly free: ``_times(node)[node.gpus]``, mostly without the list:
        from the release key kept for it, or from its occupants when their work holds exactly
        what it lacks (``_whole_from_occupants``)."""
        name, size = node.name, node.gpus
        whole = self.whole_at.get(name)
        if whole is not None:
            return whole
        times = self.time_for.get(name)
        if times is not None:
            return times[size]
        if self.keys is not None and name not in self.changed:
            whole = self._whole_from_key(name, size)
        else:
            whole = self._whole_from_occupants(name, size)
        return self._times(node)[size] if whole is None else whole

    def _whole_from_key(self, name: str, size: int) -> float | None:
        """When ``name`` is wholly free, from its release key (worked out and kept if missing);
        None when the key does not settle it."""
        keys = self.keys
        assert keys is not None  # callers look here only with keys
        key = keys.get(name, UNKNOWN)
        if key is UNKNOWN:
            left, here = self._state(name)
            key = keys[name] = release_key(name, size, left, here)
        if key is None:
            return None
        latest = key[0] if self.preemptive else key[1]  # type: ignore[index]  # UNKNOWN (an object() sentinel) was replaced above
        whole = self.whole_at[name] = latest if latest >= self.now else self.now
        return whole

    def _whole_from_occupants(self, name: str, size: int) -> float | None:
        """When ``name`` is wholly free, when its work holds exactly what it lacks: its last
        release (clamped to now); never when its work holds less; None when that does not
        settle it (``_times`` works it out in full)."""
        left, here = self._state(name)
        if not (0 <= left < size and here):
            return None
        total, latest, now = left, -INFINITE, self.now
        for workload in here:
            end = release_at(workload, now, self.preemptive)
            for placed, gpus in workload.placement:
                if placed == name:
                    if gpus <= 0:
                        return None  # not the plain case: work it out in full
                    total += gpus
                    if end > latest:
                        latest = end
        if total == size:
            whole = self.whole_at[name] = latest if latest >= now else now
            return whole
        if 0 <= total < size:
            whole = self.whole_at[name] = INFINITE
            return whole
        return None

    def _release(self, workload: RunningWorkload) -> float:
        return release_at(workload, self.now, self.preemptive)

    def _times(self, node: ClusterNodeSpec) -> list[float]:
        """The earliest time ``node`` has g free GPUs, for every g up to its size."""
        now, name, size = self.now, node.name, node.gpus
        left, here = self._state(name)
        if not here and 0 <= left <= size:  # nothing to wait for: free now, the rest never
            times = self.time_for[name] = [now] * (left + 1) + [INFINITE] * (size - left)
            return times
        events = []
        release = self._release
        assert here is not None  # free counts stay in 0..size: no occupants returned above
        for workload in here:
            end = release(workload)
            placement = workload.placement
            if len(placement) == 1:
                events.append((end, placement[0][1]))  # its only node is this one
                continue
            for placed, gpus in placement:
                if placed == name:
                    events.append((end, gpus))
        if len(events) > 1:
            events.sort()
        if not 0 <= left <= size:
            times = self.time_for[name] = _times_per_count(size, left, events, now)
            return times
        times = _fill_times(size, left, events, now)
        self.time_for[name] = times
        return times

    def earliest(self, shape: Shape) -> tuple[float, tuple[str, ...]]:
        """(start time, nodes) for ``shape``; (inf, ()) when unknown."""
        gpus, per_node, gpu_type = shape
        kind = self.layout.kind(gpu_type)
        largest = kind.largest
        if per_node is None and largest is not None and largest >= gpus:
            if gpus == kind.size and self.keys is not None:  # whole nodes of one size: in order
                return self._first_whole(gpus, kind)
            return self._one_node(gpus, kind.nodes)
        per_node = per_node or largest or 0
        if not per_node or gpus % per_node:
            return INFINITE, ()
        if per_node == kind.size and self.keys is not None:
            return self._whole_nodes(gpus // per_node, kind)
        return self._many_nodes(gpus // per_node, per_node, kind.nodes)

    def _first_whole(self, gpus: int, kind: Kind) -> tuple[float, tuple[str, ...]]:
        """``_one_node`` for a shape that takes a whole node, all candidates being of its size:
        the earliest (time, name) of the domains' earliest."""
        best = min(
            filter(None, (first_nodes(timed, 1, self.now) for timed in self._timed(kind))), default=None
        )
        if best is None:
            return INFINITE, ()
        return best

    def _whole_nodes(self, count: int, kind: Kind) -> tuple[float, tuple[str, ...]]:
        """``_many_nodes`` for a gang of ``count`` whole nodes, all candidates being of one size,
        from the nodes in release order (``ReleaseOrder``): the domain whose ``count``-th node is free
        first (ties by domain name); when none has enough, the nodes of all domains together."""
        now = self.now
        listed = self._timed(kind)
        best, chosen = None, None
        for domain, timed in zip(kind.domains, listed, strict=True):
            if len(timed) >= count:
                time = timed[count - 1][0]
                if time < INFINITE:
                    option = (time if time > now else now, domain)  # (all free by now: now)
                    if best is None or option < best:
                        best, chosen = option, timed
        if chosen is not None:
            return pick_nodes(chosen, count, now)
        everything = sorted(chain.from_iterable(timed[: bisect_left(timed, NEVER)] for timed in listed))
        return first_nodes(everything, count, now) or (INFINITE, ())

    def _timed(self, kind: Kind) -> list[list[tuple[float, str]]]:
        """Per domain of ``kind`` (in ``kind.domains`` order), its nodes as (time wholly free,
        name), in that order, inf last. Times before ``now`` are not clamped to it: they all mean
        "now", so the nodes free now are the ones up to ``now`` (see ``first_nodes``). Nodes this pass
        changed and nodes whose key does not settle it are worked out here (``_wholes``): the
        lists of their domains are copies, the others the carried lists themselves."""
        keys = self.keys
        assert keys is not None  # (earliest reads an order only with keys)
        ranks = self._release_order(keys).ranks(kind)
        listed = ranks.synced(self, keys)
        changed, where = self.changed, ranks.where
        aside = [name for name in changed if name in where] if changed else []
        aside.extend(name for name in ranks.unsettled if name not in changed)
        if aside:
            nodes, domain_of, copied = self.nodes, ranks.domain_of, set()
            listed = list(listed)
            for name in aside:  # (in any order: names are unique)
                at = domain_of[where[name]]
                if at not in copied:
                    copied.add(at)
                    listed[at] = list(listed[at])
                timed = listed[at]
                key = ranks.seen[where[name]]
                if key is not None and key is not UNSEEN:  # its carried entry: not this pass's
                    del timed[bisect_left(timed, (key[ranks.index], name))]
                insort(timed, (self._wholes((nodes[name],))[0], name))
        return listed

    def _release_order(self, keys: dict) -> ReleaseOrder:
        """The order carried in the session (or this profile) for ``keys`` and the layout; a new
        one for new ones."""
        order = self.session.release_order if self.session is not None else self.order
        if (
            order is None
            or order.keys is not keys
            or order.layout is not self.layout
            or order.preemptive != self.preemptive
        ):
            order = ReleaseOrder(keys, self.layout, self.preemptive)
            if self.session is not None:
                self.session.release_order = order
            else:
                self.order = order
        return order

    def _one_node(self, gpus: int, candidates: list[ClusterNodeSpec]) -> tuple[float, tuple[str, ...]]:
        best = min(((self._at(n, gpus), n.name) for n in candidates if n.gpus >= gpus), default=None)
        if best is None or best[0] == INFINITE:
            return INFINITE, ()
        return best[0], (best[1],)

    def _many_nodes(self, count: int, per_node: int, candidates: list) -> tuple[float, tuple[str, ...]]:
        domains: dict[str, list[tuple[float, str]]] = {}
        wholes = iter(self._wholes(node for node in candidates if node.gpus == per_node))
        for node in candidates:
            if node.gpus > per_node:
                time = self._at(node, per_node)
            elif node.gpus == per_node:  # the usual gang of whole nodes, worked out at once
                time = next(wholes)
            else:
                continue  # (INFINITE)
            if time < INFINITE:
                domains.setdefault(node.domain, []).append((time, node.name))
        options = []
        for domain, timed in domains.items():
            if len(timed) >= count:
                timed.sort()
                options.append(
                    (timed[count - 1][0], domain, tuple(sorted(name for _, name in timed[:count])))
                )
        if options:
            time, _, names = min(options)
            return time, names
        everything = sorted(entry for timed in domains.values() for entry in timed)
        if len(everything) < count:
            return INFINITE, ()
        return everything[count - 1][0], tuple(sorted(name for _, name in everything[:count]))


def _fill_times(size: int, free: int, events: list[tuple[float, int]], now: float) -> list[float]:
    """``_times_per_count`` for ``0 <= free <= size``, one release at a time: each release fills
    the counts it reaches at once (the count g is free when the release that brings the total to
    g or more happens); counts no release reaches are never free."""
    times = [now] * (size + 1)
    available = free
    for end, gpus in events:
        if available >= size:
            break
        reached = min(available + gpus, size)
        if reached > available:
            times[available + 1 : reached + 1] = [end if end >= now else now] * (reached - available)
            available = reached
    if available < size:
        times[available + 1 :] = [INFINITE] * (size - available)
    return times


def _times_per_count(size: int, free: int, events: list[tuple[float, int]], now: float) -> list[float]:
    """times[g] = earliest time the node has at least g free GPUs (index 0 unused)."""
    times = [now] * (size + 1)
    available, latest = free, now
    pending = iter(events)
    for count in range(free + 1, size + 1):
        while available < count:
            event = next(pending, None)
            if event is None:
                break
            latest, gpus = event
            available += gpus
        times[count] = max(latest, now) if available >= count else INFINITE
    return times
