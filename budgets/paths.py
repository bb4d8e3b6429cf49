"""The subtree rule, written once: a node's subtree is the node and every node whose path starts
with the node's path followed by ``/``. A bare prefix test is wrong (``lab/nlp`` is not above
``lab/nlp-eval``), so every place that asks "is this inside that subtree" calls one of these.
"""

from __future__ import annotations

from django.db.models import Q


def in_subtree(path: str, root: str) -> bool:
    """Is ``path`` the node ``root`` or one of its descendants?"""
    return path == root or path.startswith(root + "/")


def below(path: str, root: str) -> bool:
    """Is ``path`` a strict descendant of ``root`` (the node itself excluded)?"""
    return path.startswith(root + "/")


def subtree_q(root: str, *, field: str = "path") -> Q:
    """The ORM filter for ``in_subtree`` on ``field`` (e.g. ``allocation__path``)."""
    return Q(**{field: root}) | Q(**{f"{field}__startswith": root + "/"})


def below_q(root: str, *, field: str = "path") -> Q:
    """The ORM filter for ``below`` on ``field``."""
    return Q(**{f"{field}__startswith": root + "/"})


def path_inconsistencies() -> list[tuple[str, str]]:
    """(stored path, expected path) for every node whose path is not its parent's path + its slug.

    The tree's invariant; the services keep it under the tree lock (``budgets.services``) and the
    race tests check it after every round of concurrent edits. Empty when the tree is sound.
    """
    from budgets.models import BudgetNode

    rows = {pk: (parent_id, slug, path) for pk, parent_id, slug, path in
            BudgetNode.objects.values_list("pk", "parent_id", "slug", "path")}  # fmt: skip
    wrong = []
    for _pk, (parent_id, slug, path) in sorted(rows.items(), key=lambda item: item[1][2]):
        expected = slug if parent_id is None else f"{rows[parent_id][2]}/{slug}"
        if path != expected:
            wrong.append((path, expected))
    return wrong
