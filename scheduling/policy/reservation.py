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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from scheduling.policy.placement import Shape
from scheduling.policy.types import ClusterNodeSpec, RunningWorkload

INFINITE = math.inf


def release_at(workload: RunningWorkload, now: float, preemptive: bool = True) -> float:
    end = workload.expected_end if workload.expected_end is not None else INFINITE
    if not preemptive:
        return end
    if not workload.funded:
        return now
    return min(end, max(workload.protected_until, now))


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
    ) -> None:
        """``keys``: what earlier profiles worked out per node from its occupants alone (see
        ``_key``), kept by the caller while those occupants stay; ``changed``: the nodes whose
        occupants changed since (their keys are not read, nor written)."""
        self.now = now
        self.preemptive = preemptive
        self.nodes = {node.name: node for node in nodes if node.name in free}
        self.time_for: dict[str, list[float]] = {}  # made when first asked for (see _times)
        self.whole_at: dict[str, float] = {}  # time_for[name][size], when asked for alone (_whole)
        self.state: dict[str, tuple[int, Sequence[RunningWorkload] | None]] = {}  # free, occupants
        self.candidates: dict[str | None, list[ClusterNodeSpec]] = {}  # per GPU type (None: any)
        self.keys = keys
        self.changed = set(changed)
        self._note(self.nodes, free, occupants)

    def refresh(self, names: Iterable[str], free: Mapping[str, int], occupants: Mapping) -> None:
        """Recompute the given nodes (after work started on them or left them). What a node's
        times are made of is noted now and they are worked out when first asked for: the caller
        refreshes every node whose occupants changed before it asks again (``earliest``)."""
        names = list(names)
        self.changed.update(names)
        self._note(names, free, occupants)

    def _note(self, names: Iterable[str], free: Mapping[str, int], occupants: Mapping) -> None:
        nodes, state, on_node = self.nodes, self.state, occupants.get
        time_for, whole_at = self.time_for, self.whole_at
        for name in names:
            if name in nodes:
                state[name] = (free[name], on_node(name))
                time_for.pop(name, None)
                whole_at.pop(name, None)

    def _at(self, node: ClusterNodeSpec, count: int) -> float:
        """The earliest time ``node`` has ``count`` GPUs free."""
        if count == node.gpus:
            return self._wholes((node,))[0]
        times = self.time_for.get(node.name)
        return (self._times(node) if times is None else times)[count]

    def _wholes(self, nodes: Iterable[ClusterNodeSpec]) -> list[float]:
        """``[_times(node)[node.gpus] for node in nodes]``, mostly without the lists: when a node's
        work holds exactly what it lacks, that is its last release (clamped to now), whatever the
        order of the others; when it holds less, never."""
        now, preemptive = self.now, self.preemptive
        whole_at, time_for, state = self.whole_at, self.time_for, self.state
        keys, changed = self.keys, self.changed
        found = []
        for node in nodes:
            name, size = node.name, node.gpus
            whole = whole_at.get(name)
            if whole is None:
                times = time_for.get(name)
                if times is not None:
                    whole = times[size]
                elif keys is not None and name not in changed:
                    key = keys.get(name, _UNKNOWN)
                    if key is _UNKNOWN:
                        left, here = state[name]
                        key = keys[name] = _key(name, size, left, here)
                    if key is None:
                        whole = self._times(node)[size]
                    else:
                        latest = key[0] if preemptive else key[1]
                        whole = whole_at[name] = latest if latest >= now else now
                else:
                    left, here = state[name]
                    if 0 <= left < size and here:
                        total, latest = left, -INFINITE
                        for workload in here:
                            end = workload.expected_end  # release_at, inlined (the hot path)
                            if end is None:
                                end = INFINITE
                            if preemptive:
                                if not workload.funded:
                                    end = now
                                else:
                                    protected = workload.protected_until
                                    if now > protected:
                                        protected = now
                                    if protected < end:
                                        end = protected
                            for placed, gpus in workload.placement:
                                if placed == name:
                                    if gpus <= 0:
                                        total = -1  # not the plain case: work it out in full
                                        break
                                    total += gpus
                                    if end > latest:
                                        latest = end
                            if total < 0:
                                break
                        if total == size:
                            whole = whole_at[name] = latest if latest >= now else now
                        elif 0 <= total < size:
                            whole = whole_at[name] = INFINITE
                    if whole is None:
                        whole = self._times(node)[size]
            found.append(whole)
        return found

    def _release(self, workload: RunningWorkload) -> float:
        return release_at(workload, self.now, self.preemptive)

    def _times(self, node: ClusterNodeSpec) -> list[float]:
        """The earliest time ``node`` has g free GPUs, for every g up to its size."""
        now, name, size = self.now, node.name, node.gpus
        left, here = self.state[name]
        if not here and 0 <= left <= size:  # nothing to wait for: free now, the rest never
            times = self.time_for[name] = [now] * (left + 1) + [INFINITE] * (size - left)
            return times
        events = []
        release = self._release
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
        # _times_per_count, inlined: each release fills the counts it reaches at once (the
        # count g is free when the release that brings the total to g or more happens)
        times = [now] * (size + 1)
        available = left
        for end, gpus in events:
            if available >= size:
                break
            reached = available + gpus
            if reached > available:
                if reached > size:
                    reached = size
                times[available + 1 : reached + 1] = [end if end >= now else now] * (reached - available)
                available = reached
        if available < size:  # nothing more is released: never
            times[available + 1 :] = [INFINITE] * (size - available)
        self.time_for[name] = times
        return times

    def earliest(self, shape: Shape) -> tuple[float, tuple[str, ...]]:
        """(start time, nodes) for ``shape``; (inf, ()) when unknown."""
        gpus, per_node, gpu_type = shape
        candidates = self.candidates.get(gpu_type)
        if candidates is None:
            candidates = self.candidates[gpu_type] = [
                node for node in self.nodes.values() if gpu_type in (None, node.gpu_type)
            ]
        if per_node is None and any(node.gpus >= gpus for node in candidates):
            return self._one_node(gpus, candidates)
        per_node = per_node or max((node.gpus for node in candidates), default=0)
        if not per_node or gpus % per_node:
            return INFINITE, ()
        return self._many_nodes(gpus // per_node, per_node, candidates)

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


_UNKNOWN = object()


def _key(
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
        end = workload.expected_end
        if end is None:
            end = INFINITE
        if end > declared:
            declared = end
        if workload.funded:
            protected = workload.protected_until
            held = end if end < protected else protected
            if held > preempting:
                preempting = held
        for placed, gpus in workload.placement:
            if placed == name:
                if gpus <= 0:
                    return None
                total += gpus
    if total == size:
        return (preempting, declared)
    return (INFINITE, INFINITE) if total < size else None


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
