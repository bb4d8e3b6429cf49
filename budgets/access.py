"""Who may do what on the budget tree. The one place that answers it, for pages and API alike.

A membership applies to the node's whole subtree; the closest membership up the path wins.
A manager of a node edits budgets and structure of the node's *descendants*, not the node itself.
Staff edit everything. Members may submit workloads to their nodes' subtrees; viewers only read.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User

from budgets.models import BudgetNode, Membership, Role


def ancestor_paths(path: str) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b", "a/b/c"]`` (the node itself included, root first)."""
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def memberships_by_path(user: User | AnonymousUser) -> dict[str, str]:
    """Path -> role for every membership the user holds (one query)."""
    if not user.is_authenticated:
        return {}
    return dict(Membership.objects.filter(user=user).values_list("node__path", "role"))


def role_on(
    user: User | AnonymousUser, node: BudgetNode, *, memberships: dict[str, str] | None = None
) -> str | None:
    """The closest membership role on the node or an ancestor, or None."""
    held = memberships if memberships is not None else memberships_by_path(user)
    for path in reversed(ancestor_paths(node.path)):
        if path in held:
            return held[path]
    return None


def can_view(
    user: User | AnonymousUser, node: BudgetNode, *, memberships: dict[str, str] | None = None
) -> bool:
    # Every signed-in user may read the whole tree: budgets are public inside the lab.
    return bool(user.is_authenticated)


def can_edit(
    user: User | AnonymousUser, node: BudgetNode, *, memberships: dict[str, str] | None = None
) -> bool:
    """May edit this node's name, placement, archive flag and allocations (it must be below a managed node)."""
    return _manages_one_of(user, ancestor_paths(node.path)[:-1], memberships)


def can_add_child(
    user: User | AnonymousUser, node: BudgetNode, *, memberships: dict[str, str] | None = None
) -> bool:
    """A manager of a node may create children under it (they are its descendants)."""
    return _manages_one_of(user, ancestor_paths(node.path), memberships)


def _manages_one_of(user: User | AnonymousUser, paths: list[str], memberships: dict[str, str] | None) -> bool:
    """Staff manage everything; anyone else must hold the manager role on one of ``paths``."""
    if not user.is_authenticated:
        return False
    if user.is_staff:
        return True
    held = memberships if memberships is not None else memberships_by_path(user)
    return any(held.get(path) == Role.MANAGER for path in paths)


def can_submit(
    user: User | AnonymousUser, node: BudgetNode, *, memberships: dict[str, str] | None = None
) -> bool:
    """Members and managers may charge workloads to their nodes' subtrees; staff anywhere."""
    if not user.is_authenticated:
        return False
    if user.is_staff:
        return True
    return role_on(user, node, memberships=memberships) in {Role.MANAGER, Role.MEMBER}
