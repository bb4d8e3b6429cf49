"""The one entitlement function: the chain of shares, over-commitment scaled down, edge cases;
and the editor's tree and the pass's owed rates reading the same numbers from it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from budgets.entitlement import entitlements
from budgets.selectors import budget_tree
from scheduling.policy import PendingWorkload
from scheduling.snapshot import budget_tree as pass_budget_tree
from scheduling.snapshot import owed_rates, snapshot_build

TREE = {"lab": None, "lab/a": "lab", "lab/b": "lab", "lab/a/x": "lab/a", "other": None}


@pytest.mark.parametrize(
    ("allocations", "available", "expected"),
    [
        pytest.param(
            {"lab": 20, "lab/a": 10, "lab/b": 5, "lab/a/x": 10, "other": 0},
            32,
            {"lab": 20, "lab/a": 10, "lab/b": 5, "lab/a/x": 10, "other": 0},
            id="headroom-everywhere-entitlement-equals-allocation",
        ),
        pytest.param(
            {"lab": 20, "lab/a": 30, "lab/b": 10, "lab/a/x": 10, "other": 0},
            32,
            {"lab": 20, "lab/a": 15, "lab/b": 5, "lab/a/x": 5, "other": 0},
            id="over-committed-siblings-scaled-down-pro-rata-and-their-children-with-them",
        ),
        pytest.param(
            {"lab": 30, "lab/a": 0, "lab/b": 0, "lab/a/x": 0, "other": 30},
            40,
            {"lab": 20, "lab/a": 0, "lab/b": 0, "lab/a/x": 0, "other": 20},
            id="roots-over-committing-the-cluster-share-its-available-gpus",
        ),
        pytest.param(
            {"lab": 20, "lab/a": 0, "lab/b": 10, "lab/a/x": 8, "other": 0},
            32,
            {"lab": 20, "lab/a": 0, "lab/b": 10, "lab/a/x": 0, "other": 0},
            id="a-parent-without-budget-gives-its-children-nothing",
        ),
        pytest.param(
            {"lab": 20, "lab/a": 10, "lab/b": 5, "lab/a/x": 10, "other": 0},
            0,
            {"lab": 0, "lab/a": 0, "lab/b": 0, "lab/a/x": 0, "other": 0},
            id="no-available-gpus-no-entitlement",
        ),
        pytest.param(
            {"lab": 0, "lab/a": 0, "lab/b": 0, "lab/a/x": 0, "other": 0},
            32,
            {"lab": 0, "lab/a": 0, "lab/b": 0, "lab/a/x": 0, "other": 0},
            id="all-zero-divisors-give-zero-not-an-error",
        ),
    ],
)
def test_entitlement_follows_the_chain_of_shares(allocations, available, expected):
    result = entitlements(
        allocations={k: float(v) for k, v in allocations.items()}, parents=TREE, available=float(available)
    )
    assert result == pytest.approx({k: float(v) for k, v in expected.items()})


def test_decimals_in_give_exact_decimals_out():
    allocations = {"lab": Decimal(20), "lab/a": Decimal(30), "lab/b": Decimal(10), "lab/a/x": Decimal(10)}
    allocations["other"] = Decimal(0)
    result = entitlements(allocations=allocations, parents=TREE, available=Decimal(32))
    assert result["lab/a"] == Decimal(15) and isinstance(result["lab/a/x"], Decimal)


def test_a_node_under_a_parent_outside_the_tree_is_left_out():
    result = entitlements(
        allocations={"a": 4.0, "b": 4.0}, parents={"a": None, "b": "archived"}, available=8.0
    )
    assert result == {"a": 4.0}


def test_siblings_never_get_more_than_their_parent():
    allocations = {"lab": 20.0, "lab/a": 30.0, "lab/b": 10.0, "lab/a/x": 10.0, "other": 0.0}
    result = entitlements(allocations=allocations, parents=TREE, available=32.0)
    assert result["lab/a"] + result["lab/b"] <= result["lab"] + 1e-9


def test_the_editor_and_the_pass_owe_the_same_entitlement_when_a_node_is_over_committed(lab):
    # In the budgets lab, vision's teams (perception 8, generation 6) were promised more than its 12.
    tree = budget_tree(cluster=lab.main, user=lab.ada)
    assert tree.row_for(lab.vision.pk).overcommitted
    editor = {row.node.path: float(row.entitlement) for row in tree.rows}
    paths, parents, budgets = pass_budget_tree(lab.main)
    snapshot = snapshot_build(cluster=lab.main, now=datetime(2026, 3, 2, tzinfo=UTC))
    unlimited_demand = tuple(
        PendingWorkload(id=index, allocation=path, user="bob", gpus=1000, submitted_at=0.0)
        for index, path in enumerate(sorted(budgets))
    )
    owed = owed_rates(
        snapshot=replace(snapshot, pending=unlimited_demand),
        parents=parents,
        budgets=budgets,
        path_ids={path: node_id for node_id, path in paths.items()},
    )
    assert {paths[node_id]: rate for node_id, rate in owed.items()} == pytest.approx(
        {path: gpus for path, gpus in editor.items() if gpus > 0}
    )
