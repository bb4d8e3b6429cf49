"""Placement (DESIGN 5.1) over an index of free GPUs, so a pass never scans nodes x workloads.

The index keeps, per GPU type, the healthy nodes bucketed by their free GPU count (each bucket a
name-sorted list) and, per (GPU type, node size, topology domain), the nodes that are wholly free.

- A job that fits one node goes to the *fullest* node that still fits (best fit: smallest free
  count >= g, ties by node name), so small jobs pack and whole nodes stay free for big ones.
- A multi-node gang takes ``g / size`` wholly free nodes, all in one topology domain when one has
  enough (the domain with the fewest free nodes that suffices, ties by domain name), otherwise
  spread over the fewest domains. All or nothing: either every node is found or nothing is taken.
- With an explicit ``gpus_per_node`` p < g, it takes ``g / p`` nodes with at least p free each,
  preferring one domain, best fit within it.
GPUs are never overcommitted: ``take`` refuses to go below zero.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

from scheduling.policy.types import ClusterNodeSpec, Placement

Shape = tuple[int, int | None, str | None]  # (gpus, gpus_per_node, gpu_type)


class FreeIndex:
    """Free GPUs per healthy node, bucketed by free count; see the module docstring."""

    def __init__(self, nodes: Iterable[ClusterNodeSpec] = ()) -> None:
        self.free: dict[str, int] = {}
        self.spec: dict[str, ClusterNodeSpec] = {}
        self.buckets: dict[str, list[list[str]]] = {}  # gpu type -> [free count] -> sorted names
        self.whole: dict[tuple[str, int, str], list[str]] = {}  # (type, size, domain) -> names
        self.free_by_type: dict[str, int] = {}
        self.filings: list[str] = []  # nodes added or removed since it was made, in order
        for node in nodes:
            self.add_node(node, node.gpus)

    @classmethod
    def filed(cls, nodes: Iterable[ClusterNodeSpec], free: dict[str, int]) -> FreeIndex:
        """An index of ``nodes`` with ``free[name]`` free GPUs each: what ``add_node`` one by one
        gives, with each bucket sorted once instead of kept sorted on every insert."""
        index = cls()
        buckets, whole, free_by_type = index.buckets, index.whole, index.free_by_type
        spec = index.spec = {node.name: node for node in nodes}
        index.free = {name: free[name] for name in spec}
        for name, node in spec.items():
            kind, size = node.gpu_type, node.gpus
            left = free[name]
            lists = buckets.get(kind)
            if lists is None:
                lists = buckets[kind] = [[] for _ in range(size + 1)]
                free_by_type[kind] = 0
            elif len(lists) <= size:
                lists.extend([] for _ in range(size + 1 - len(lists)))
            if left:
                lists[left].append(name)
                if left == size:
                    whole.setdefault((kind, size, node.domain), []).append(name)
            free_by_type[kind] += left
        for lists in buckets.values():
            for bucket in lists:
                bucket.sort()
        for names in whole.values():
            names.sort()
        return index

    def copy(self) -> FreeIndex:
        """An independent index with the same free counts (list copies, no re-sorting)."""
        twin = FreeIndex()
        twin.free = dict(self.free)
        twin.spec = dict(self.spec)
        twin.buckets = {kind: [list(bucket) for bucket in buckets] for kind, buckets in self.buckets.items()}
        twin.whole = {key: list(names) for key, names in self.whole.items()}
        twin.free_by_type = dict(self.free_by_type)
        return twin

    # -- maintenance -------------------------------------------------------------------------
    def add_node(self, node: ClusterNodeSpec, free: int) -> None:
        self.filings.append(node.name)
        self.spec[node.name] = node
        self.free[node.name] = 0
        if node.gpu_type not in self.buckets:
            self.buckets[node.gpu_type] = [[] for _ in range(node.gpus + 1)]
            self.free_by_type[node.gpu_type] = 0
        elif len(self.buckets[node.gpu_type]) <= node.gpus:
            self.buckets[node.gpu_type].extend(
                [] for _ in range(node.gpus + 1 - len(self.buckets[node.gpu_type]))
            )
        self._set(node.name, free)

    def remove_node(self, name: str) -> int:
        self.filings.append(name)
        free = self.free[name]
        self._set(name, 0)
        del self.free[name]
        del self.spec[name]
        return free

    def take(self, placement: Placement) -> None:
        for name, gpus in placement:
            left = self.free[name] - gpus
            if left < 0:
                raise ValueError(f"node {name} would be overcommitted")
            self._set(name, left)

    def give(self, placement: Placement) -> None:
        for name, gpus in placement:
            if name in self.free:
                self._set(name, min(self.free[name] + gpus, self.spec[name].gpus))

    def set_free(self, name: str, free: int) -> None:
        """File ``name`` at ``free`` free GPUs (for a carried index: see filing.py)."""
        if self.free[name] != free:
            self._set(name, free)

    def _set(self, name: str, free: int) -> None:
        node = self.spec[name]
        old = self.free[name]
        buckets = self.buckets[node.gpu_type]
        if old:
            bucket = buckets[old]
            del bucket[bisect_left(bucket, name)]
            if old == node.gpus:
                whole = self.whole[(node.gpu_type, node.gpus, node.domain)]
                del whole[bisect_left(whole, name)]
        if free:
            insort(buckets[free], name)
            if free == node.gpus:
                insort(self.whole.setdefault((node.gpu_type, node.gpus, node.domain), []), name)
        self.free[name] = free
        self.free_by_type[node.gpu_type] += free - old

    # -- queries -----------------------------------------------------------------------------
    def types_for(self, gpu_type: str | None) -> list[str]:
        if gpu_type is None:
            return sorted(self.buckets)
        return [gpu_type] if gpu_type in self.buckets else []

    def largest(self, gpu_type: str | None) -> int:
        """The most GPUs any one node of this type (any type for None) has."""
        if gpu_type is not None:
            buckets = self.buckets.get(gpu_type)
            return 0 if buckets is None else len(buckets) - 1
        return max(map(len, self.buckets.values()), default=1) - 1

    def free_gpus(self, gpu_type: str | None) -> int:
        if gpu_type is None:
            return sum(self.free_by_type.values())
        return self.free_by_type.get(gpu_type, 0)

    def place(self, shape: Shape) -> Placement | None:
        """A placement for ``shape`` on free GPUs, or None; does not take it."""
        gpus, per_node, gpu_type = shape
        if self.free_gpus(gpu_type) < gpus:  # every way of placing it needs that many free
            return None
        if per_node is not None and per_node < gpus:
            return self._place_spread(gpus, per_node, gpu_type)
        single = self._best_fit(gpus, gpu_type)
        if single is not None or per_node is not None:
            return single
        return self._place_whole_nodes(gpus, gpu_type)

    def _best_fit(self, gpus: int, gpu_type: str | None) -> Placement | None:
        best: tuple[int, str] | None = None
        for kind in self.types_for(gpu_type):
            buckets = self.buckets[kind]
            for count in range(gpus, len(buckets)):
                if buckets[count]:
                    candidate = (count, buckets[count][0])
                    if best is None or candidate < best:
                        best = candidate
                    break
        return None if best is None else ((best[1], gpus),)

    def _place_whole_nodes(self, gpus: int, gpu_type: str | None) -> Placement | None:
        for kind, size in self._gang_sizes(gpus, gpu_type):
            domains = {
                key[2]: names for key, names in self.whole.items() if key[:2] == (kind, size) and names
            }
            names = pick_in_domains(domains, gpus // size)
            if names is not None:
                return tuple((name, size) for name in sorted(names))
        return None

    def _gang_sizes(self, gpus: int, gpu_type: str | None) -> list[tuple[str, int]]:
        """(type, node size) pairs a multi-node gang of ``gpus`` may use, largest nodes first."""
        pairs = {(key[0], key[1]) for key in self.whole if gpu_type in (None, key[0])}
        usable = [pair for pair in pairs if pair[1] and gpus % pair[1] == 0]
        return sorted(usable, key=lambda pair: (-pair[1], pair[0]))

    def _place_spread(self, gpus: int, per_node: int, gpu_type: str | None) -> Placement | None:
        if gpus % per_node:
            return None
        domains: dict[str, list[str]] = {}
        for kind in self.types_for(gpu_type):
            buckets = self.buckets[kind]
            for count in range(per_node, len(buckets)):
                for name in buckets[count]:
                    domains.setdefault(self.spec[name].domain, []).append(name)
        names = pick_in_domains(domains, gpus // per_node)
        return None if names is None else tuple((name, per_node) for name in sorted(names))


def pick_in_domains(domains: dict[str, list[str]], count: int) -> list[str] | None:
    """``count`` names, all from one domain when one has enough (the smallest such, then by name),
    else from the fewest domains (largest first, ties by name); None when there are too few."""
    if count <= 0 or sum(len(names) for names in domains.values()) < count:
        return None
    fitting = sorted((len(names), domain) for domain, names in domains.items() if len(names) >= count)
    if fitting:
        return domains[fitting[0][1]][:count]
    picked: list[str] = []
    for _, domain in sorted((-len(names), domain) for domain, names in domains.items()):
        picked.extend(domains[domain][: count - len(picked)])
        if len(picked) == count:
            break
    return picked
