"""Victim choice (DESIGN 5 step 5): the smallest, cheapest set of running work to free a placement.

The caller decides *who may be a victim* (past protected-until or unfunded, charged to an
allocation that still ranks at or below the preemptor's after the preemptor is charged, never work
that started at ``now``) and hands them over *in preemption order*: unfunded before funded, then
most over-served allocation first, then least work lost (a resumable victim loses little, so it
goes before a non-resumable one), then id. This module only decides *which* of them to take.

- One-node shape: victims are taken in order, each freeing its GPUs on its nodes; the first node
  that reaches the GPUs it needs wins (so its worst victim is the best possible worst victim; among
  nodes completed by the same victim: fewest victims, then node name). Only that node's victims
  are preempted.
- Multi-node gang: a node is usable if it is wholly free or every workload on it is a victim, its
  cost being the order of its worst victim; take ``g / size`` usable nodes in one domain when
  possible (cheapest worst victim, then fewest victims, then domain name), else the cheapest
  nodes overall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.types import Placement, RunningWorkload

Choice = tuple[Placement, list[RunningWorkload]]


class VictimPool:
    """Victims in preemption order, the nodes they could clear, and upper bounds that reject
    hopeless shapes in O(1). Built once per preemptor standing and reused for every shape.

    Each part is worked out the first time a shape asks for it (most attempts are one-node shapes,
    which read only ``best_one_node``; only gangs read ``whole_nodes``, ``clearable`` and
    ``rank``). A pool lives one standing (generation), in which neither ``index`` nor
    ``occupants`` changes, so working a part out later gives what working it out now would."""

    def __init__(self, ordered: Sequence[RunningWorkload], index: FreeIndex, occupants: Mapping) -> None:
        self.ordered = ordered
        self._index = index
        self._occupants = occupants
        self._rank: dict[int, int] | None = None
        self._freeable: dict[str, int] | None = None
        self._best_one_node: dict[str, int] | None = None
        self._whole_nodes: dict[tuple[str, int], int] | None = None
        self._clearable: list[tuple[int, str, list[RunningWorkload]]] | None = None
        self.usable: dict[tuple[int, str | None], dict] = {}  # (node size, gpu type) -> usable nodes

    @property
    def rank(self) -> dict[int, int]:
        """victim id -> its position in preemption order."""
        rank = self._rank
        if rank is None:
            rank = self._rank = {victim.id: position for position, victim in enumerate(self.ordered)}
        return rank

    def _freeable_gpus(self) -> dict[str, int]:
        """node in the index -> the GPUs its victims hold there."""
        freeable = self._freeable
        if freeable is None:
            held: dict[str, int] = {}
            get = held.get
            for victim in self.ordered:
                for name, gpus in victim.placement:
                    held[name] = get(name, 0) + gpus
            free = self._index.free
            freeable = self._freeable = {name: gpus for name, gpus in held.items() if name in free}
        return freeable

    def _one_node_reachable(self, gpus: int, gpu_type: str | None) -> bool:
        """Whether taking victims in order ever leaves ``gpus`` free on one node of the type: the
        test ``best_one_node`` answers, but stopping at the first such node (most one-node
        attempts ask once per pool). A walk that finds none has seen every victim, so it keeps
        what they hold for ``best_one_node`` and ``clearable``."""
        held: dict[str, int] = {}
        get = held.get
        free, spec = self._index.free, self._index.spec
        for victim in self.ordered:
            for name, on_node in victim.placement:
                total = held[name] = get(name, 0) + on_node
                left = free.get(name)
                if left is not None and left + total >= gpus and gpu_type in (None, spec[name].gpu_type):
                    return True
        self._freeable = {name: on_node for name, on_node in held.items() if name in free}
        return False

    @property
    def best_one_node(self) -> dict[str, int]:
        """gpu type -> most GPUs one node could have free (a maximum: the order of nodes is moot)."""
        best = self._best_one_node
        if best is None:
            best = self._best_one_node = {}
            free, spec = self._index.free, self._index.spec
            for name, gpus in self._freeable_gpus().items():
                kind = spec[name].gpu_type
                total = free[name] + gpus
                known = best.get(kind)
                if known is None or total > known:
                    best[kind] = total
        return best

    @property
    def whole_nodes(self) -> dict[tuple[str, int], int]:
        """(type, size) -> nodes that could be wholly free."""
        if self._whole_nodes is None:
            self._clear()
        assert self._whole_nodes is not None  # set by _clear
        return self._whole_nodes

    @property
    def clearable(self) -> list[tuple[int, str, list[RunningWorkload]]]:
        """(worst rank, node, victims) of each occupied node all of whose work may go, by name."""
        if self._clearable is None:
            self._clear()
        assert self._clearable is not None  # set by _clear
        return self._clearable

    def _clear(self) -> None:
        index, occupants, rank = self._index, self._occupants, self.rank
        free = index.free
        whole: dict[tuple[str, int], int] = {}
        clearable: list[tuple[int, str, list[RunningWorkload]]] = []
        for name in sorted(self._freeable_gpus()):
            spec = index.spec[name]
            on_node = occupants.get(name, ())
            if free[name] < spec.gpus and on_node:
                worst = -1  # the last in preemption order of what runs there, if all of it may go
                for occupant in on_node:
                    at = rank.get(occupant.id)
                    if at is None:
                        break
                    if at > worst:
                        worst = at
                else:
                    key = (spec.gpu_type, spec.gpus)
                    whole[key] = whole.get(key, 0) + 1
                    clearable.append((worst, name, list(on_node)))
        for (kind, size, _), names in index.whole.items():
            whole[(kind, size)] = whole.get((kind, size), 0) + len(names)
        self._whole_nodes, self._clearable = whole, clearable

    def hopeless(self, shape: Shape, index: FreeIndex) -> bool:
        gpus, per_node, gpu_type = shape
        if not self.ordered:
            return True
        if per_node is not None and per_node < gpus and per_node != index.largest(gpu_type):
            return False  # a spread: no cheap bound, let the search decide
        if (per_node is None or per_node >= gpus) and index.largest(gpu_type) >= gpus:
            if self._best_one_node is None and self._freeable is None:
                return not self._one_node_reachable(gpus, gpu_type)
            return all(best < gpus for kind, best in self.best_one_node.items() if gpu_type in (None, kind))
        return not any(
            count * size >= gpus and gpus % size == 0 and per_node in (None, size)
            for (kind, size), count in self.whole_nodes.items()
            if gpu_type in (None, kind)
        )


def choose_victims(shape: Shape, index: FreeIndex, pool: VictimPool) -> Choice | None:
    """Victims for ``shape``: one node; whole nodes for a gang (also one that names the node size
    as its GPUs per node); or, for an explicit spread, ``g / p`` nodes with ``p`` GPUs each."""
    gpus, per_node, gpu_type = shape
    if not pool.ordered:
        return None
    if per_node is None or per_node >= gpus:
        if index.largest(gpu_type) >= gpus:
            return _on_one_node(gpus, gpu_type, index, pool.ordered)
        return None if per_node is not None else _on_whole_nodes(gpus, gpu_type, index, pool)
    if gpus % per_node:
        return None
    whole = _on_whole_nodes(gpus, gpu_type, index, pool, only_size=per_node)
    return whole if whole is not None else _spread(gpus // per_node, per_node, gpu_type, index, pool.ordered)


def _spread(
    count: int, per_node: int, gpu_type: str | None, index: FreeIndex, ordered: Sequence
) -> Choice | None:
    """``count`` nodes with ``per_node`` GPUs free each, victims taken in order; the first domain
    that has enough ready nodes wins (else the earliest ready nodes anywhere)."""
    ready: dict[str, tuple[int, list[RunningWorkload]]] = {}  # node -> (victim rank when ready, victims)
    per_domain: dict[str, int] = {}
    for kind in index.types_for(gpu_type):
        for free_count in range(per_node, len(index.buckets[kind])):
            for name in index.buckets[kind][free_count]:
                ready[name] = (-1, [])
                per_domain[index.spec[name].domain] = per_domain.get(index.spec[name].domain, 0) + 1
    taken: dict[str, list[RunningWorkload]] = {}
    freed: dict[str, int] = {}
    for rank, victim in enumerate(ordered):
        for name, on_node in victim.placement:
            spec = index.spec.get(name)
            if spec is None or name in ready or spec.gpus < per_node or gpu_type not in (None, spec.gpu_type):
                continue
            taken.setdefault(name, []).append(victim)
            freed[name] = freed.get(name, 0) + on_node
            if index.free[name] + freed[name] >= per_node:
                ready[name] = (rank, taken[name])
                per_domain[spec.domain] = per_domain.get(spec.domain, 0) + 1
                if per_domain[spec.domain] >= count:
                    in_domain = [other for other in ready if index.spec[other].domain == spec.domain]
                    return _spread_choice(ready, in_domain, count, per_node)
    if len(ready) < count:
        return None
    return _spread_choice(ready, list(ready), count, per_node)


def _spread_choice(ready: dict, names: list[str], count: int, per_node: int) -> Choice:
    chosen = sorted(names, key=lambda name: (ready[name][0], len(ready[name][1]), name))[:count]
    victims: dict[int, RunningWorkload] = {}
    for name in chosen:
        for victim in ready[name][1]:
            victims.setdefault(victim.id, victim)
    return tuple(sorted((name, per_node) for name in chosen)), list(victims.values())


def _on_one_node(gpus: int, gpu_type: str | None, index: FreeIndex, ordered: Sequence) -> Choice | None:
    taken: dict[str, list[RunningWorkload]] = {}
    freed: dict[str, int] = {}
    spec_of, free = index.spec, index.free
    for victim in ordered:
        done = []
        for name, on_node in victim.placement:
            spec = spec_of.get(name)
            if spec is None or spec.gpus < gpus or gpu_type not in (None, spec.gpu_type):
                continue
            taken.setdefault(name, []).append(victim)
            freed[name] = freed.get(name, 0) + on_node
            if free[name] + freed[name] >= gpus:
                done.append((len(taken[name]), name))
        if done:
            name = min(done)[1]
            return ((name, gpus),), taken[name]
    return None


def _on_whole_nodes(
    gpus: int, gpu_type: str | None, index: FreeIndex, pool: VictimPool, only_size: int | None = None
) -> Choice | None:
    sizes = sorted({size for kind, size in pool.whole_nodes if gpu_type in (None, kind)}, reverse=True)
    if only_size is not None:
        sizes = [size for size in sizes if size == only_size]
    for size in sizes:
        if size and gpus % size == 0:
            chosen = _cheapest_in_domains(_usable_nodes(size, gpu_type, index, pool), gpus // size)
            if chosen is not None:
                victims = {victim.id: victim for *_, node_victims in chosen for victim in node_victims}
                placement = tuple(sorted((name, size) for _, name, _ in chosen))
                return placement, sorted(victims.values(), key=lambda victim: pool.rank[victim.id])
    return None


def _usable_nodes(size: int, gpu_type: str | None, index: FreeIndex, pool: VictimPool) -> dict:
    """domain -> [(worst victim's rank, node name, victims)] for nodes that are free or clearable."""
    cached = pool.usable.get((size, gpu_type))
    if cached is not None:
        return cached
    usable: dict[str, list] = {}
    pool.usable[(size, gpu_type)] = usable
    for (kind, node_size, domain), names in index.whole.items():
        if node_size == size and gpu_type in (None, kind):
            usable.setdefault(domain, []).extend((-1, name, []) for name in names)
    for worst, name, victims in pool.clearable:
        spec = index.spec[name]
        if spec.gpus == size and gpu_type in (None, spec.gpu_type):
            usable.setdefault(spec.domain, []).append((worst, name, victims))
    return usable


def _cheapest_in_domains(usable: dict, count: int) -> list | None:
    options = []
    for domain, nodes in usable.items():
        if len(nodes) >= count:
            picked = sorted(nodes, key=lambda node: (node[0], len(node[2]), node[1]))[:count]
            options.append(((picked[-1][0], sum(len(node[2]) for node in picked), domain), picked))
    if options:
        return min(options, key=lambda option: option[0])[1]
    everything = sorted(
        (node for nodes in usable.values() for node in nodes), key=lambda n: (n[0], len(n[2]), n[1])
    )
    return everything[:count] if len(everything) >= count else None
