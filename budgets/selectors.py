"""Reads of the budget tree: the access-checked getters, the tree per cluster, and history.

The tree is computed in a fixed number of queries (nodes, allocations, healthy GPUs, the user's
memberships) whatever its size; tests pin the count.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404

from budgets import access
from budgets.entitlement import entitlements
from budgets.models import Allocation, BudgetChange, BudgetNode
from budgets.paths import below
from scheduling.models import Cluster

User = AuthUser | AnonymousUser
Action = Literal["view", "edit", "add_child"]
_CHECKS = {"view": access.can_view, "edit": access.can_edit, "add_child": access.can_add_child}
ZERO = Decimal(0)


# --- access-checked getters: the only way views and the API fetch a node or a cluster -----------


def budget_node_for_user(*, user: User, node_id: object, action: Action = "view") -> BudgetNode:
    """The node, if ``user`` may perform ``action`` on it: 404 when missing, 403 when not allowed."""
    try:
        node = BudgetNode.objects.select_related("parent").get(pk=int(str(node_id)))
    except (BudgetNode.DoesNotExist, ValueError):
        raise Http404("No such budget node.") from None
    if not _CHECKS[action](user, node):
        raise PermissionDenied(f"You may not {action.replace('_', ' ')} {node.path}.")
    return node


def cluster_for_user(*, user: User, slug: str) -> Cluster:
    """Clusters are visible to every signed-in user."""
    if not user.is_authenticated:
        raise PermissionDenied("Sign in to see clusters.")
    try:
        return Cluster.objects.get(slug=slug)
    except Cluster.DoesNotExist:
        raise Http404("No such cluster.") from None


# --- clusters ---------------------------------------------------------------------------------


def cluster_list() -> QuerySet[Cluster]:
    """Clusters with their node and GPU counts (installed and healthy), in one query."""
    healthy = Q(nodes__healthy=True)
    return Cluster.objects.annotate(
        node_count=Count("nodes"),
        healthy_node_count=Count("nodes", filter=healthy),
        installed_gpus=Sum("nodes__gpus", default=0),
        healthy_gpus=Sum("nodes__gpus", filter=healthy, default=0),
    ).order_by("id")  # creation order: the first cluster set up is the main one


# --- the tree ---------------------------------------------------------------------------------


@dataclass
class TreeRow:
    """One live node of the tree on one cluster, with its budget arithmetic."""

    node: BudgetNode
    depth: int
    gpus: Decimal  # its allocation on this cluster (0 when it has none)
    share: Decimal | None  # gpus / parent's gpus (None when the parent has no budget)
    entitlement: Decimal  # GPUs after the chain of shares (see budget_tree)
    children_gpus: Decimal = ZERO  # sum of the live children's allocations
    child_count: int = 0
    can_edit: bool = False
    can_add_child: bool = False

    @property
    def overcommitted(self) -> bool:
        """The children together were promised more than this node has."""
        return self.children_gpus > self.gpus

    @property
    def overcommitted_by(self) -> Decimal:
        return max(self.children_gpus - self.gpus, ZERO)

    @property
    def share_percent(self) -> Decimal | None:
        return None if self.share is None else self.share * 100


@dataclass
class BudgetTree:
    cluster: Cluster
    healthy_gpus: Decimal
    rows: list[TreeRow] = field(default_factory=list)

    @property
    def allocated_gpus(self) -> Decimal:
        return sum((row.gpus for row in self.rows if row.depth == 0), ZERO)

    @property
    def unallocated_gpus(self) -> Decimal:
        return self.healthy_gpus - self.allocated_gpus

    @property
    def overcommitted(self) -> bool:
        return self.allocated_gpus > self.healthy_gpus

    def row_for(self, node_id: int) -> TreeRow | None:
        return next((row for row in self.rows if row.node.pk == node_id), None)


def budget_tree(*, cluster: Cluster, user: User) -> BudgetTree:
    """The live (non-archived) tree with allocations on ``cluster``, depth-first, siblings by name.

    Entitlements come from :func:`budgets.entitlement.entitlements` (the formula, its range and edge
    cases are stated there; over-committed siblings are scaled down pro rata), the same function the
    pass charges owed GPU-seconds with. A parent with no budget gives its children share None.
    Ties in the order: name (case-insensitive), then id.
    """
    healthy = Decimal(cluster_healthy_gpus(cluster=cluster))
    nodes = list(BudgetNode.objects.filter(archived=False))
    gpus = dict(
        Allocation.objects.filter(cluster=cluster, node__archived=False).values_list("node_id", "gpus")
    )
    entitled = entitlements(
        allocations={node.pk: gpus.get(node.pk, ZERO) for node in nodes},
        parents={node.pk: node.parent_id for node in nodes},
        available=healthy,
    )
    builder = _TreeBuilder(
        tree=BudgetTree(cluster=cluster, healthy_gpus=healthy),
        children=_children_by_parent(nodes),
        gpus=gpus,
        entitled=entitled,
        user=user,
        memberships=access.memberships_by_path(user),
    )
    builder.add_children(parent_id=None, parent_gpus=healthy, depth=0)
    return builder.tree


def cluster_healthy_gpus(*, cluster: Cluster) -> int:
    return cluster.nodes.filter(healthy=True).aggregate(total=Sum("gpus", default=0))["total"]


def _children_by_parent(nodes: list[BudgetNode]) -> dict[int | None, list[BudgetNode]]:
    live = {node.pk for node in nodes}
    children: dict[int | None, list[BudgetNode]] = defaultdict(list)
    for node in sorted(nodes, key=lambda n: (n.name.lower(), n.pk)):
        if node.parent_id is None or node.parent_id in live:
            children[node.parent_id].append(node)
    return children


@dataclass
class _TreeBuilder:
    tree: BudgetTree
    children: dict[int | None, list[BudgetNode]]
    gpus: dict[int, Decimal]
    entitled: dict[int, Decimal]
    user: User
    memberships: dict[str, str]

    def add_children(self, *, parent_id: int | None, parent_gpus: Decimal, depth: int) -> Decimal:
        """Append the rows below ``parent_id`` depth-first; returns the sum of their allocations."""
        siblings = self.children.get(parent_id, [])
        for node in siblings:
            own = self.gpus.get(node.pk, ZERO)
            entitlement = self.entitled.get(node.pk, ZERO)
            row = self._row(node, depth=depth, own=own, parent_gpus=parent_gpus, entitlement=entitlement)
            self.tree.rows.append(row)
            row.children_gpus = self.add_children(parent_id=node.pk, parent_gpus=own, depth=depth + 1)
        return sum((self.gpus.get(node.pk, ZERO) for node in siblings), ZERO)

    def _row(
        self, node: BudgetNode, *, depth: int, own: Decimal, parent_gpus: Decimal, entitlement: Decimal
    ) -> TreeRow:
        return TreeRow(
            node=node,
            depth=depth,
            gpus=own,
            share=own / parent_gpus if parent_gpus > 0 else None,
            entitlement=entitlement,
            child_count=len(self.children.get(node.pk, [])),
            can_edit=access.can_edit(self.user, node, memberships=self.memberships),
            can_add_child=access.can_add_child(self.user, node, memberships=self.memberships),
        )


def move_targets(*, tree: BudgetTree, node: BudgetNode) -> list[TreeRow]:
    """Rows the node may move under: ones the user may add children to, outside its own subtree."""
    return [
        row
        for row in tree.rows
        if row.can_add_child
        and row.node.pk not in (node.pk, node.parent_id)
        and not below(row.node.path, node.path)
    ]


# --- history ----------------------------------------------------------------------------------


def node_history(*, node: BudgetNode, limit: int = 25) -> list[BudgetChange]:
    """The node's latest changes, newest first."""
    return list(BudgetChange.objects.filter(node=node).select_related("actor", "cluster")[:limit])


def budget_changes() -> QuerySet[BudgetChange]:
    """All history rows, newest first, with what the API and pages show of them."""
    return BudgetChange.objects.select_related("node", "actor", "cluster").order_by("-at", "-id")


def allocations() -> QuerySet[Allocation]:
    return Allocation.objects.select_related("node", "cluster").order_by("cluster__name", "node__path", "id")
