"""Victim choice (DESIGN 5 step 5): the smallest, cheapest set of running work to free a placement.

The caller decides *who may be a victim* (past protected-until or unfunded, charged to an
allocation that still ranks at or below the preemptor's after the preemptor is charged, never work
that started at ``now``); this module only decides *which* of those to take, given a sort key in
which smaller means "preempt first": unfunded before funded, then most over-served, then least work
lost (a resumable victim loses little, so it goes before a non-resumable one), then id.

- One-node shape: on each node, take victims in key order until the node has the GPUs; among nodes
  pick the one whose worst victim is best, then fewest victims, then node name.
- Multi-node gang: a node is usable if it is wholly free or every workload on it is a victim; take
  ``g / size`` usable nodes in one domain when possible (cheapest worst victim, then fewest victims,
  then domain name), else the cheapest nodes overall.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.types import Placement, RunningWorkload

VictimKey = Callable[[RunningWorkload], tuple]
Choice = tuple[Placement, list[RunningWorkload]]


def choose_victims(
    shape: Shape,
    index: FreeIndex,
    occupants: Mapping[str, Sequence[RunningWorkload]],
    candidates: Iterable[RunningWorkload],
    victim_key: VictimKey,
) -> Choice | None:
    gpus, per_node, gpu_type = shape
    if per_node is not None and per_node < gpus:
        return None  # explicit spreads are placed on free GPUs only
    by_node: dict[str, list[tuple[tuple, RunningWorkload, int]]] = {}
    for victim in candidates:
        key = victim_key(victim)
        for name, on_node in victim.placement:
            spec = index.spec.get(name)
            if spec is not None and gpu_type in (None, spec.gpu_type):
                by_node.setdefault(name, []).append((key, victim, on_node))
    one_node = _on_one_node(gpus, index, by_node)
    if one_node is not None or per_node is not None:
        return one_node
    return _on_whole_nodes(gpus, gpu_type, index, occupants, by_node)


def _on_one_node(gpus: int, index: FreeIndex, by_node: dict) -> Choice | None:
    best: tuple | None = None
    for name in sorted(by_node):
        if index.spec[name].gpus < gpus:
            continue
        need = gpus - index.free[name]
        chosen: list[tuple[tuple, RunningWorkload, int]] = []
        for entry in sorted(by_node[name], key=lambda item: item[0]):
            if need <= 0:
                break
            chosen.append(entry)
            need -= entry[2]
        if need <= 0 and chosen:
            option = (chosen[-1][0], len(chosen), name)
            if best is None or option < best[0]:
                best = (option, chosen)
    if best is None:
        return None
    name = best[0][2]
    return ((name, gpus),), [victim for _, victim, _ in best[1]]


def _on_whole_nodes(
    gpus: int, gpu_type: str | None, index: FreeIndex, occupants: Mapping, by_node: dict
) -> Choice | None:
    sizes = sorted(
        {spec.gpus for spec in index.spec.values() if gpu_type in (None, spec.gpu_type)}, reverse=True
    )
    for size in sizes:
        if size == 0 or gpus % size:
            continue
        usable = _usable_nodes(size, gpu_type, index, occupants, by_node)
        chosen = _cheapest_in_domains(usable, gpus // size)
        if chosen is not None:
            victims = {victim.id: victim for *_, node_victims in chosen for victim in node_victims}
            placement = tuple(sorted((name, size) for _, name, _ in chosen))
            return placement, [victims[key] for key in sorted(victims)]
    return None


def _usable_nodes(
    size: int, gpu_type: str | None, index: FreeIndex, occupants: Mapping, by_node: dict
) -> dict:
    """domain -> [(worst victim key, node name, victims)] for nodes that are free or clearable."""
    usable: dict[str, list] = {}
    for (kind, node_size, domain), names in index.whole.items():
        if node_size == size and gpu_type in (None, kind):
            usable.setdefault(domain, []).extend(((), name, []) for name in names)
    for name, entries in by_node.items():
        spec = index.spec[name]
        if spec.gpus != size or index.free[name] == size:
            continue
        eligible = {victim.id for _, victim, _ in entries}
        if all(occupant.id in eligible for occupant in occupants.get(name, ())):
            worst = max(entry[0] for entry in entries)
            usable.setdefault(spec.domain, []).append((worst, name, [victim for _, victim, _ in entries]))
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
