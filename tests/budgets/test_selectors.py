"""The tree per cluster: shares, entitlements after the chain of shares, over-commitment, query count."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from budgets import selectors, services
from budgets.models import Allocation, BudgetNode
from scheduling.models import Node


def _rows(lab, user=None) -> dict[str, selectors.TreeRow]:  # noqa: ANN001
    tree = selectors.budget_tree(cluster=lab.main, user=user or lab.alice)
    return {row.node.slug: row for row in tree.rows}


def test_the_tree_is_depth_first_with_siblings_by_name(lab):
    tree = selectors.budget_tree(cluster=lab.main, user=lab.alice)

    assert [(row.depth, row.node.slug) for row in tree.rows] == [
        (0, "lab"), (1, "language"), (1, "vision"), (2, "generation"), (2, "perception"), (3, "detection"),
    ]  # fmt: skip


def test_the_root_is_entitled_to_its_share_of_the_healthy_gpus(lab):
    tree = selectors.budget_tree(cluster=lab.main, user=lab.alice)
    root = tree.rows[0]

    assert tree.healthy_gpus == 24  # the unhealthy node's 8 GPUs do not count
    assert (root.gpus, root.entitlement) == (20, 20)
    assert root.share == Decimal(20) / 24
    assert (tree.allocated_gpus, tree.unallocated_gpus, tree.overcommitted) == (20, 4, False)


def test_over_committed_children_are_flagged_and_scaled_down_pro_rata(lab):
    rows = _rows(lab)

    assert rows["vision"].overcommitted and rows["vision"].overcommitted_by == 2  # 8 + 6 > 12
    assert rows["perception"].entitlement == Decimal(8) * 12 / 14
    assert rows["generation"].entitlement == Decimal(6) * 12 / 14
    assert rows["detection"].entitlement == Decimal(4) * (Decimal(8) * 12 / 14) / 8
    assert not rows["lab"].overcommitted and not rows["perception"].overcommitted


def test_a_parent_with_headroom_passes_entitlement_down_in_proportion_to_its_budget(lab):
    rows = _rows(lab)

    assert rows["language"].share == Decimal(6) / 20
    assert rows["language"].entitlement == 6  # 6/20 of the org's 20


def test_losing_a_node_shrinks_every_entitlement_but_not_the_allocations(lab):
    Node.objects.filter(cluster=lab.main, name="n0").update(healthy=False)  # 16 healthy GPUs < the org's 20
    tree = selectors.budget_tree(cluster=lab.main, user=lab.alice)

    assert tree.overcommitted
    assert tree.rows[0].entitlement == 16 and tree.rows[0].gpus == 20


def test_a_node_without_budget_gives_its_children_no_entitlement_and_no_share(lab):
    services.allocation_set(actor=lab.ada, node=lab.perception, cluster=lab.main, gpus=0, reason="paused")
    rows = _rows(lab)

    assert rows["detection"].share is None
    assert rows["detection"].entitlement == 0
    assert rows["perception"].overcommitted


def test_archived_nodes_leave_the_tree_and_their_parents_sums(lab):
    services.node_archive(actor=lab.alice, node=lab.generation)
    rows = _rows(lab)

    assert "generation" not in rows
    assert rows["vision"].children_gpus == 8 and not rows["vision"].overcommitted


def test_allocations_on_another_cluster_do_not_leak_into_this_one(lab):
    tree = selectors.budget_tree(cluster=lab.small, user=lab.alice)

    assert tree.healthy_gpus == 8
    assert all(row.gpus == 0 and row.entitlement == 0 for row in tree.rows)


@pytest.mark.parametrize(
    ("persona", "editable", "can_add_under"),
    [
        (
            "alice",
            {"perception", "generation", "detection"},
            {"vision", "perception", "generation", "detection"},
        ),
        ("bob", set(), set()),
        ("charlie", set(), set()),
        ("nobody", set(), set()),
        ("oscar", {"lab", "vision", "perception", "generation", "detection", "language"}, None),
        ("ada", {"lab", "vision", "perception", "generation", "detection", "language"}, None),
    ],
)
def test_each_row_says_what_the_persona_may_do(lab, persona, editable, can_add_under):
    rows = _rows(lab, getattr(lab, persona))

    assert {slug for slug, row in rows.items() if row.can_edit} == editable
    assert {slug for slug, row in rows.items() if row.can_add_child} == (can_add_under or editable)


def test_the_tree_takes_four_queries_whatever_its_size(lab, django_assert_num_queries):
    with django_assert_num_queries(4):
        selectors.budget_tree(cluster=lab.main, user=lab.alice)
    for index in range(30):
        node = services.node_create(actor=lab.ada, parent=lab.generation, name=f"project {index}")
        Allocation.objects.create(node=node, cluster=lab.main, gpus=1)

    with django_assert_num_queries(4):
        tree = selectors.budget_tree(cluster=lab.main, user=lab.alice)
    assert len(tree.rows) == 36


def test_move_targets_exclude_the_node_its_subtree_and_its_current_parent(lab):
    tree = selectors.budget_tree(cluster=lab.main, user=lab.alice)

    targets = {row.node.slug for row in selectors.move_targets(tree=tree, node=lab.perception)}

    assert targets == {"generation"}  # alice may add under vision's subtree only; vision is the parent


def test_the_cluster_list_counts_nodes_and_gpus(lab, django_assert_num_queries):
    with django_assert_num_queries(1):
        main, small = selectors.cluster_list()

    assert (main.node_count, main.healthy_node_count, main.installed_gpus, main.healthy_gpus) == (
        4,
        3,
        32,
        24,
    )
    assert (small.slug, small.healthy_gpus) == ("small", 8)


def test_the_getter_refuses_what_the_persona_may_not_do(lab):
    assert (
        selectors.budget_node_for_user(user=lab.alice, node_id=lab.perception.pk, action="edit")
        == lab.perception
    )
    with pytest.raises(PermissionDenied):
        selectors.budget_node_for_user(user=lab.alice, node_id=lab.vision.pk, action="edit")
    with pytest.raises(PermissionDenied):
        selectors.budget_node_for_user(user=lab.bob, node_id=lab.perception.pk, action="edit")
    with pytest.raises(Http404):
        selectors.budget_node_for_user(user=lab.ada, node_id=BudgetNode.objects.count() + 99)
    with pytest.raises(Http404):
        selectors.budget_node_for_user(user=lab.ada, node_id="not-a-number")
