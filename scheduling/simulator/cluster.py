"""The simulated cluster's shape: node groups, the ``--cluster-file`` JSON, and what a job may ask for.

A cluster is a list of node groups, each with its own node count, GPUs per node and GPU type::

    {"groups": [{"nodes": 60, "gpus_per_node": 8, "gpu_type": "a100"},
                {"nodes": 20, "gpus_per_node": 4, "gpu_type": "v100"}]}

The one-group form ``{"nodes": 26, "gpus_per_node": 8}`` (the shared traces' ``-cluster.json``)
means the same as a single group. ``gpu_type`` defaults to ``GPU``; ``nodes_per_domain`` (per
group, or the command line's ``--nodes-per-domain``) splits a group into topology domains, and a
domain never spans two groups.

:func:`fit_job` holds the rules that turn a trace's request into one this cluster can place
(rounding and skipping, each counted by kind); they mirror how the policy places work
(``scheduling.policy.preemption.choose_victims``): on one node when it fits; otherwise on whole
nodes of one size that divides the request; or, with ``gpus_per_node`` below the request, spread
over ``gpus / gpus_per_node`` nodes that have that many GPUs each.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduling.policy import ClusterNodeSpec

DEFAULT_GPU_TYPE = "GPU"
GROUP_KEYS = ("nodes", "gpus_per_node", "gpu_type", "nodes_per_domain")


class ClusterFileError(ValueError):
    """A ``--cluster-file`` that cannot be read; the message names the file and the key."""


@dataclass(frozen=True)
class NodeGroup:
    """``nodes`` machines with ``gpus_per_node`` GPUs of ``gpu_type`` each."""

    nodes: int
    gpus_per_node: int
    gpu_type: str = DEFAULT_GPU_TYPE
    nodes_per_domain: int = 0  # 0: the group is one domain


def read_cluster_file(path: str | Path) -> tuple[NodeGroup, ...]:
    """The node groups of a cluster JSON file, in its order (either form; see the module doc)."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ClusterFileError(f"{source}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ClusterFileError(f"{source}: expected an object with 'groups' or 'nodes'")
    if "groups" in data:
        extra = sorted(set(data) - {"groups"})
        if extra:
            raise ClusterFileError(f"{source}: unknown key(s) {', '.join(extra)} beside 'groups'")
        entries = data["groups"]
        if not isinstance(entries, list) or not entries:
            raise ClusterFileError(f"{source}: 'groups' must be a non-empty list")
        return tuple(_group(entry, f"{source}: groups[{index}]") for index, entry in enumerate(entries))
    return (_group(data, source),)


def _group(entry: object, where: str) -> NodeGroup:
    if not isinstance(entry, dict):
        raise ClusterFileError(f"{where}: expected an object like {{'nodes': 8, 'gpus_per_node': 8}}")
    unknown = sorted(set(entry) - set(GROUP_KEYS))
    if unknown:
        raise ClusterFileError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(GROUP_KEYS)}"
        )
    for key in ("nodes", "gpus_per_node"):
        if key not in entry:
            raise ClusterFileError(f"{where}: '{key}' is missing")
    numbers = {}
    for key, least in (("nodes", 1), ("gpus_per_node", 1), ("nodes_per_domain", 0)):
        value = entry.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ClusterFileError(f"{where}: '{key}' must be a whole number >= {least}, got {value!r}")
        numbers[key] = value
    gpu_type = entry.get("gpu_type", DEFAULT_GPU_TYPE)
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        raise ClusterFileError(f"{where}: 'gpu_type' must be a non-empty string, got {gpu_type!r}")
    return NodeGroup(
        numbers["nodes"], numbers["gpus_per_node"], gpu_type.strip(), numbers["nodes_per_domain"]
    )


def group_nodes(groups: Sequence[NodeGroup], *, nodes_per_domain: int = 0) -> tuple[ClusterNodeSpec, ...]:
    """The nodes of ``groups``: named ``node-0000`` on in group order, domains numbered on across
    groups (a group's own ``nodes_per_domain`` wins over the argument; 0 means one domain)."""
    nodes: list[ClusterNodeSpec] = []
    first_domain = 0
    for group in groups:
        size = group.nodes_per_domain or nodes_per_domain or group.nodes
        for index in range(group.nodes):
            domain = f"domain-{first_domain + index // size:02d}"
            nodes.append(
                ClusterNodeSpec(f"node-{len(nodes):04d}", group.gpus_per_node, group.gpu_type, domain)
            )
        first_domain += math.ceil(group.nodes / size)
    return tuple(nodes)


# -- what a job may ask for ---------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """A request made placeable: its GPUs, GPUs per node and GPU type, the adjustments made to it
    (kinds, see ``traces.ADJUSTMENTS``), and ``skip`` (a kind) when no adjustment could help."""

    gpus: int
    gpus_per_node: int | None
    gpu_type: str | None
    adjustments: tuple[str, ...] = ()
    skip: str = ""


def fit_job(gpus: float, gpus_per_node: int | None, gpu_type: str | None, groups: Sequence[NodeGroup]) -> Fit:
    """Turn a trace's request into one this cluster can place, or say why it is skipped.

    In order: no GPUs (0) -> skipped; a fraction of a GPU -> rounded up to whole GPUs; a GPU type
    no node has (compared without case) -> skipped; a spread whose ``gpus_per_node`` is more than
    any node of the type has -> re-split at the largest node size; a job that still cannot be
    placed -> rounded up to the fewest GPUs that fill whole nodes (of its ``gpus_per_node``, else of
    any one node size the cluster has enough of); and if even that cannot be placed (wider than
    every node of its type together) -> skipped.
    """
    if gpus <= 0:
        return Fit(0, gpus_per_node, gpu_type, skip="skipped_no_gpus")
    adjustments: list[str] = []
    whole = math.ceil(round(gpus, 6))
    if whole != round(gpus, 6):
        adjustments.append("rounded_up_fractional")
    kind = _known_type(gpu_type, groups)
    if gpu_type is not None and kind is None:
        return Fit(whole, gpus_per_node, gpu_type, tuple(adjustments), skip="skipped_unknown_gpu_type")
    eligible = [group for group in groups if kind is None or group.gpu_type == kind]
    largest = max(group.gpus_per_node for group in eligible)
    per_node = gpus_per_node
    if per_node is not None and per_node > largest and whole > largest:
        per_node = largest
        adjustments.append("reshaped_gpus_per_node")
    if not placeable(whole, per_node, eligible):
        wider = _rounded_up(whole, per_node, eligible)
        if wider is None:
            return Fit(whole, per_node, kind, tuple(adjustments), skip="skipped_too_large")
        whole = wider
        adjustments.append("rounded_up_wide")
    return Fit(whole, per_node, kind, tuple(adjustments))


def placeable(gpus: int, gpus_per_node: int | None, groups: Sequence[NodeGroup]) -> bool:
    """Whether an empty cluster of ``groups`` could place the request, as the policy places work:
    one node that has ``gpus``; else (no ``gpus_per_node``) whole nodes of one size dividing
    ``gpus``; else ``gpus / gpus_per_node`` nodes with at least ``gpus_per_node`` GPUs each."""
    if not groups:
        return False
    if gpus_per_node is None or gpus_per_node >= gpus:
        if max(group.gpus_per_node for group in groups) >= gpus:
            return True
        if gpus_per_node is not None:
            return False
        return any(
            gpus % size == 0 and count * size >= gpus for size, count in _nodes_by_size(groups).items()
        )
    if gpus % gpus_per_node:
        return False
    return (
        sum(group.nodes for group in groups if group.gpus_per_node >= gpus_per_node) * gpus_per_node >= gpus
    )


def _rounded_up(gpus: int, gpus_per_node: int | None, groups: Sequence[NodeGroup]) -> int | None:
    """The fewest GPUs above ``gpus`` that fill whole nodes and can be placed, or None: multiples
    of a spread's ``gpus_per_node``, else of any one node size."""
    spread = gpus_per_node if gpus_per_node is not None and gpus_per_node < gpus else None
    units = [spread] if spread is not None else sorted(_nodes_by_size(groups), reverse=True)
    candidates = (math.ceil(gpus / unit) * unit for unit in units)
    return min((wider for wider in candidates if placeable(wider, spread, groups)), default=None)


def _nodes_by_size(groups: Sequence[NodeGroup]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for group in groups:
        counts[group.gpus_per_node] = counts.get(group.gpus_per_node, 0) + group.nodes
    return counts


def _known_type(gpu_type: str | None, groups: Sequence[NodeGroup]) -> str | None:
    """The cluster's spelling of ``gpu_type`` (compared without case), or None."""
    if gpu_type is None:
        return None
    wanted = gpu_type.lower()
    return next((group.gpu_type for group in groups if group.gpu_type.lower() == wanted), None)
