"""Writes to the budget tree. Every service runs in one transaction and records a BudgetChange row
for each real change, and only for real changes (renaming a node to its own name writes nothing).

Services validate the business rules (unique sibling names, no cycles, non-negative GPUs, a reason
for every budget change) and raise ``django.core.exceptions.ValidationError`` keyed by field name, so
a form or a serializer can show the message next to the field. Permissions are not checked here:
callers fetch nodes through ``budgets.selectors.budget_node_for_user`` first.

Concurrency: every edit that writes paths or reads a subtree by path (create, rename, move,
archive) first takes the tree lock (``_lock_tree``) and only then re-reads the rows it rewrites, so
concurrent structural edits apply one after the other and never compute a path from a stale read.
Allocation changes take the same lock shared: they run side by side, but never beside an archive.
"""

from __future__ import annotations

import re
from decimal import Decimal

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils.text import slugify

from budgets.models import Allocation, BudgetChange, BudgetNode
from budgets.paths import below, below_q
from scheduling.models import Cluster

MAX_GPUS = Decimal("99999999.99")  # what Allocation.gpus (10 digits, 2 decimals) can hold
CENT = Decimal("0.01")
PLAIN_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)", re.ASCII)
TREE_LOCK = (0x7EE, 0)  # the PostgreSQL advisory-lock key of the budget tree (scheduling uses 0x5C4ED)


def node_create(*, actor: User | AnonymousUser | None, parent: BudgetNode | None, name: str) -> BudgetNode:
    """Create a budget node under ``parent`` (a root when None) and record its creation."""
    name, slug = _clean_name(name)
    if parent is not None and parent.archived:
        raise ValidationError({"name": "The parent is archived; it cannot have new children."})
    with transaction.atomic():
        _lock_tree()
        if parent is not None:
            (parent,) = _locked(parent)  # its path as it is now, not as the caller read it
            if parent.archived:
                raise ValidationError({"name": "The parent is archived; it cannot have new children."})
        _refuse_sibling_clash(parent=parent, slug=slug, name=name)
        path = f"{parent.path}/{slug}" if parent else slug
        node = BudgetNode.objects.create(name=name, slug=slug, parent=parent, path=path)
        _record(node=node, actor=actor, field="created", old="", new=path)
    return node


def node_rename(*, actor: User | AnonymousUser | None, node: BudgetNode, name: str) -> BudgetNode:
    """Rename a node; its slug, and the path of its whole subtree, follow the new name."""
    name, slug = _clean_name(name)
    with transaction.atomic():
        _lock_tree()
        (node,) = _locked(node)
        if name == node.name:
            return node
        _refuse_sibling_clash(parent=node.parent, slug=slug, name=name, exclude=node)
        _record(node=node, actor=actor, field="name", old=node.name, new=name)
        node.name = name
        node.slug = slug
        node.save(update_fields=["name", "slug"])
        _repath_subtree(node=node, new_path=_join(node.parent, slug))
    return node


def node_move(*, actor: User | AnonymousUser | None, node: BudgetNode, parent: BudgetNode) -> BudgetNode:
    """Move a node (with its subtree) under another parent; never under itself or a descendant.

    Both rows are locked and re-read first, so stale paths (or a concurrent move the other way)
    cannot sneak a cycle in.
    """
    with transaction.atomic():
        _lock_tree()
        node, parent = _locked(node, parent)
        if parent.pk == node.parent_id:
            return node
        if parent.pk == node.pk or below(parent.path, node.path):
            raise ValidationError({"parent": "A node cannot move under itself or one of its descendants."})
        if parent.archived:
            raise ValidationError({"parent": "The new parent is archived."})
        _refuse_sibling_clash(parent=parent, slug=node.slug, name=node.name, exclude=node)
        old_parent_path = node.parent.path if node.parent else ""
        _record(node=node, actor=actor, field="parent", old=old_parent_path, new=parent.path)
        node.parent = parent
        node.save(update_fields=["parent"])
        _repath_subtree(node=node, new_path=_join(parent, node.slug))
    return node


def node_archive(*, actor: User | AnonymousUser | None, node: BudgetNode, reason: str = "") -> int:
    """Archive a node and every live node below it; returns how many nodes were archived.

    Archived nodes leave the tree editor and fund nothing: their allocations drop to 0 (each drop
    recorded), so every reader of Allocation (the scheduler's snapshot too) sees them unfunded.
    Their history stays.
    """
    with transaction.atomic():
        _lock_tree()
        (node,) = _locked(node)
        subtree = list(
            BudgetNode.objects.select_for_update(no_key=True)
            .filter(below_q(node.path), archived=False)
            .order_by("path")
        )
        targets = ([node] if not node.archived else []) + subtree
        for target in targets:
            target.archived = True
            _record(node=target, actor=actor, field="archived", old="no", new="yes", reason=reason)
        BudgetNode.objects.filter(pk__in=[target.pk for target in targets]).update(archived=True)
        _defund(nodes=targets, actor=actor, reason=f"archived: {reason}" if reason else "archived")
    return len(targets)


def _defund(*, nodes: list[BudgetNode], actor: User | AnonymousUser | None, reason: str) -> None:
    funded = (
        Allocation.objects.select_for_update().filter(node__in=nodes, gpus__gt=0).select_related("cluster")
    )
    by_id = {node.pk: node for node in nodes}
    for allocation in funded.order_by("node__path", "cluster_id"):
        old = Decimal(allocation.gpus).quantize(CENT)
        _record(node=by_id[allocation.node_id], actor=actor, field="gpus", old=old, new=Decimal(0).quantize(CENT),
                reason=reason, cluster=allocation.cluster)  # fmt: skip
    funded.update(gpus=0)


def allocation_set(
    *,
    actor: User | AnonymousUser | None,
    node: BudgetNode,
    cluster: Cluster,
    gpus: Decimal | str,
    reason: str,
) -> Allocation:
    """Set a node's allocation on a cluster to ``gpus`` (>= 0, two decimals); a reason is required."""
    errors: dict[str, str] = {}
    amount = _parse_gpus(gpus, errors)
    reason = (reason or "").strip()
    if not reason:
        errors["reason"] = "Say briefly why the budget changes."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        _lock_tree(shared=True)
        if BudgetNode.objects.filter(pk=node.pk, archived=True).exists():  # read after an archive commits
            raise ValidationError({"gpus": "This node is archived; it cannot be funded."})
        allocation, _ = Allocation.objects.select_for_update().get_or_create(node=node, cluster=cluster)
        if allocation.gpus == amount:
            return allocation
        old = Decimal(allocation.gpus).quantize(CENT)
        allocation.gpus = amount
        allocation.save(update_fields=["gpus", "updated_at"])
        _record(node=node, actor=actor, field="gpus", old=old, new=amount, reason=reason, cluster=cluster)
    return allocation


# --- helpers -------------------------------------------------------------------------------------


def _lock_tree(*, shared: bool = False) -> None:
    """Take the budget tree's lock until the transaction ends (PostgreSQL advisory lock).

    Exclusive for edits that write paths or read a subtree by path; ``shared`` for allocation
    changes, which only must not interleave with an archive. SQLite needs nothing here: its
    transactions begin IMMEDIATE (settings), so writers already run one at a time.
    """
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", list(TREE_LOCK))


def _locked(*nodes: BudgetNode) -> list[BudgetNode]:
    """Fresh copies of the nodes, row-locked in id order (no deadlock between two movers).

    ``FOR NO KEY UPDATE``: rows that reference a node (workloads, history) can still be inserted.
    """
    rows = {
        row.pk: row
        for row in BudgetNode.objects.select_for_update(no_key=True)
        .filter(pk__in=[n.pk for n in nodes])
        .order_by("pk")
    }
    missing = [n.pk for n in nodes if n.pk not in rows]
    if missing:
        raise ValidationError({"parent": f"Budget node {missing[0]} no longer exists."})
    return [rows[n.pk] for n in nodes]


def _clean_name(name: str) -> tuple[str, str]:
    name = " ".join((name or "").split())
    slug = slugify(name)
    if not name:
        raise ValidationError({"name": "Give the node a name."})
    if len(name) > 100:
        raise ValidationError({"name": "Keep the name under 100 characters."})
    if not slug:  # slugify keeps only Latin letters, digits and dashes: the path names Slurm accounts
        raise ValidationError(
            {"name": "The name needs at least one Latin letter (a-z) or digit: it becomes the node's path."}
        )
    return name, slug


def _refuse_sibling_clash(
    *, parent: BudgetNode | None, slug: str, name: str, exclude: BudgetNode | None = None
) -> None:
    """Sibling names must differ (as slugs, so "Vision" and "vision" clash; archived siblings count)."""
    siblings = BudgetNode.objects.filter(parent=parent, slug=slug)
    if exclude is not None:
        siblings = siblings.exclude(pk=exclude.pk)
    if siblings.exists():
        where = f"under {parent.name}" if parent else "at the top level"
        raise ValidationError({"name": f"A node named {name!r} already exists {where}."})


def _join(parent: BudgetNode | None, slug: str) -> str:
    return f"{parent.path}/{slug}" if parent else slug


def _repath_subtree(*, node: BudgetNode, new_path: str) -> None:
    """Rewrite ``path`` for the node and all its descendants (two queries whatever the size)."""
    old_path = node.path
    if old_path == new_path:
        return
    descendants = list(BudgetNode.objects.filter(below_q(old_path)))
    for descendant in descendants:
        descendant.path = new_path + descendant.path[len(old_path) :]
    node.path = new_path
    BudgetNode.objects.bulk_update([node, *descendants], ["path"])


def _parse_gpus(value: Decimal | str, errors: dict[str, str]) -> Decimal:
    """Plain ASCII decimals only ("24", "12.5"): no exponents, no other scripts' digits; -0 is 0."""
    text = str(value).strip()
    if not PLAIN_DECIMAL.fullmatch(text):
        errors["gpus"] = "Enter a number of GPUs in plain digits, e.g. 24 or 12.5."
        return Decimal(0)
    amount = Decimal(text)
    if amount < 0:
        errors["gpus"] = "GPUs cannot be negative."
    elif amount > MAX_GPUS:
        errors["gpus"] = "That is more GPUs than any cluster holds."
    elif amount != amount.quantize(CENT):
        errors["gpus"] = "Use at most two decimals."
    else:
        return amount.quantize(CENT).copy_abs()  # copy_abs: "-0" is stored as 0.00, not -0.00
    return Decimal(0)


def _record(
    *,
    node: BudgetNode,
    actor: User | AnonymousUser | None,
    field: str,
    old: object,
    new: object,
    reason: str = "",
    cluster: Cluster | None = None,
) -> BudgetChange:
    return BudgetChange.objects.create(
        node=node,
        actor=actor if isinstance(actor, User) else None,
        field=field,
        old_value=str(old),
        new_value=str(new),
        reason=reason,
        cluster=cluster,
    )
