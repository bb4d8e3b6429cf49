"""Fair Tree ranking: LF = S / U per level, depth first, ties by larger S then name."""

import pytest

from scheduling.policy import PolicyConfig, plan
from scheduling.policy.ranking import FairTree
from tests.policy.builders import HOUR, NOW, nodes, order, pending, snapshot, tree

WEEK = 7 * 24 * HOUR


def fair_tree_order(budget_tree, usage, leaves):
    return FairTree(budget_tree, usage, {}).ordered(leaves)


# Slurm's Fair Tree documentation (fair_tree.shtml, "Overview for End Users"): with
#   root => Acct1 => Acct12 => UserA    and    root => Acct1 => Acct16 => UserB
# Acct1 is the first common ancestor, so UserB ranks above UserA exactly when Acct16 has the higher
# Level FS (LF = S / U among the siblings Acct12 and Acct16). Budgets are the shares here.
SLURM_TREE = tree(
    ("root", None, 100),
    ("root/acct1", "root", 50),
    ("root/acct2", "root", 50),
    ("root/acct1/acct12", "root/acct1", 30),
    ("root/acct1/acct16", "root/acct1", 20),
)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        pytest.param(
            {"root/acct1/acct12": 75.0, "root/acct1/acct16": 25.0, "root/acct2": 500.0},
            ["root/acct1/acct16", "root/acct1/acct12", "root/acct2"],
            id="acct16 LF 1.6 beats acct12 LF 0.8, so UserB ranks above UserA",
        ),
        pytest.param(
            {"root/acct1/acct12": 10.0, "root/acct1/acct16": 90.0, "root/acct2": 500.0},
            ["root/acct1/acct12", "root/acct1/acct16", "root/acct2"],
            id="acct12 LF 6 beats acct16 LF 0.44, so UserA ranks above UserB",
        ),
        pytest.param(
            {"root/acct1/acct12": 600.0, "root/acct1/acct16": 400.0, "root/acct2": 10.0},
            ["root/acct2", "root/acct1/acct12", "root/acct1/acct16"],
            id="an under-served sibling account ranks all its users above all of acct1's",
        ),
    ],
)
def test_slurm_fair_tree_documentation_example(usage, expected):
    leaves = ["root/acct1/acct12", "root/acct1/acct16", "root/acct2"]
    assert fair_tree_order(SLURM_TREE, usage, leaves) == expected


def test_every_child_of_a_higher_level_fairshare_account_ranks_above_every_child_of_its_sibling():
    # acct1 as a whole is under-served, even though acct2's second team has never used anything.
    budget_tree = tree(
        ("root", None, 100),
        ("root/acct1", "root", 50),
        ("root/acct2", "root", 50),
        ("root/acct1/x", "root/acct1", 10),
        ("root/acct1/y", "root/acct1", 10),
        ("root/acct2/p", "root/acct2", 10),
        ("root/acct2/q", "root/acct2", 10),
    )
    usage = {"root/acct1/x": 30.0, "root/acct1/y": 10.0, "root/acct2/p": 100.0}
    ranked = fair_tree_order(
        budget_tree, usage, ["root/acct1/x", "root/acct1/y", "root/acct2/p", "root/acct2/q"]
    )
    assert ranked == ["root/acct1/y", "root/acct1/x", "root/acct2/q", "root/acct2/p"]


@pytest.mark.parametrize(
    ("budgets", "usage", "expected"),
    [
        pytest.param(
            {"a": 10, "b": 10}, {}, ["a", "b"], id="no usage anywhere: LF infinite, tie broken by name"
        ),
        pytest.param({"a": 10, "b": 20}, {}, ["b", "a"], id="infinite LF tie goes to the larger share first"),
        pytest.param(
            {"a": 10, "b": 10}, {"a": 5.0}, ["b", "a"], id="unused sibling has infinite LF and goes first"
        ),
        pytest.param(
            {"a": 10, "b": 20}, {"a": 10.0, "b": 20.0}, ["b", "a"], id="equal LF: the larger share first"
        ),
        pytest.param({"a": 10, "b": 10}, {"a": 7.0, "b": 7.0}, ["a", "b"], id="equal LF and share: by name"),
        pytest.param({"a": 0, "b": 10}, {"b": 100.0}, ["b", "a"], id="an unfunded sibling ranks last"),
    ],
)
def test_level_fairshare_edge_cases_and_ties(budgets, usage, expected):
    budget_tree = tree(
        ("org", None, 100), *((f"org/{name}", "org", budget) for name, budget in budgets.items())
    )
    ranked = fair_tree_order(
        budget_tree, {f"org/{k}": v for k, v in usage.items()}, [f"org/{k}" for k in budgets]
    )
    assert ranked == [f"org/{name}" for name in expected]


def test_ai2_ratio_example_serves_allocations_at_0_8_then_1_04_then_1_25_of_budget():
    budget_tree = tree(("ai2", None, 30), ("ai2/a", "ai2", 10), ("ai2/b", "ai2", 10), ("ai2/c", "ai2", 10))
    usage = {"ai2/a": 1.25 * 10 * WEEK, "ai2/b": 0.8 * 10 * WEEK, "ai2/c": 1.04 * 10 * WEEK}
    queue = [pending(1, "ai2/a", 8), pending(2, "ai2/b", 8), pending(3, "ai2/c", 8)]
    result = plan(snapshot(budget_tree, nodes(1), queue=queue, usage=usage), NOW, PolicyConfig())
    assert [start.workload_id for start in result.starts] == [2]
    assert order(result) == [3, 1]
    assert result.fair_share["ai2/b"] < result.fair_share["ai2/c"] < result.fair_share["ai2/a"]


def test_fair_share_ratio_is_usage_share_over_budget_share():
    budget_tree = tree(("org", None, 100), ("org/a", "org", 75), ("org/b", "org", 25))
    result = plan(snapshot(budget_tree, (), usage={"org/a": 50.0, "org/b": 50.0}), NOW, PolicyConfig())
    assert result.fair_share["org/a"] == pytest.approx(0.5 / 0.75)
    assert result.fair_share["org/b"] == pytest.approx(0.5 / 0.25)
    assert "org/free" not in result.fair_share


def test_inside_an_allocation_the_user_with_less_usage_goes_first_then_submit_order():
    budget_tree = tree(("org", None, 10), ("org/a", "org", 10))
    queue = [
        pending(1, "org/a", 1, user="heavy", submitted_at=NOW - 50),
        pending(2, "org/a", 1, user="light", submitted_at=NOW - 10),
        pending(3, "org/a", 1, user="light", submitted_at=NOW - 20),
    ]
    state = snapshot(
        budget_tree, (), queue=queue, user_usage={("org/a", "heavy"): 100.0, ("org/a", "light"): 1.0}
    )
    assert order(plan(state, NOW, PolicyConfig())) == [3, 2, 1]


def test_projected_charge_spreads_one_pass_over_equally_served_allocations():
    budget_tree = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 10))
    queue = [pending(i, "org/a", 8) for i in range(1, 5)] + [pending(i, "org/b", 8) for i in range(5, 9)]
    usage = {"org/a": 1000.0, "org/b": 1000.0}
    result = plan(snapshot(budget_tree, nodes(4), queue=queue, usage=usage), NOW, PolicyConfig())
    started = sorted(start.workload_id for start in result.starts)
    assert started == [1, 2, 5, 6]


def test_without_the_projected_charge_one_allocation_takes_everything():
    budget_tree = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 10))
    queue = [pending(i, "org/a", 8) for i in range(1, 5)] + [pending(i, "org/b", 8) for i in range(5, 9)]
    usage = {"org/a": 1000.0, "org/b": 1001.0}
    result = plan(
        snapshot(budget_tree, nodes(4), queue=queue, usage=usage), NOW, PolicyConfig(projected_charge_s=0)
    )
    assert sorted(start.workload_id for start in result.starts) == [1, 2, 3, 4]


def test_priority_ordering_serves_higher_classes_first_then_fifo():
    budget_tree = tree(("org", None, 20), ("org/a", "org", 10))
    queue = [
        pending(1, "org/a", 1, priority=0, submitted_at=NOW - 30),
        pending(2, "org/a", 1, priority=5, submitted_at=NOW - 10),
        pending(3, "org/a", 1, priority=5, submitted_at=NOW - 20),
    ]
    result = plan(
        snapshot(budget_tree, (), queue=queue), NOW, PolicyConfig(ordering="priority", contract=False)
    )
    assert order(result) == [3, 2, 1]


def test_fifo_ordering_is_submit_order_whatever_the_budget():
    budget_tree = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 0))
    queue = [pending(1, "org/a", 1, submitted_at=NOW - 10), pending(2, "org/b", 1, submitted_at=NOW - 20)]
    result = plan(snapshot(budget_tree, (), queue=queue), NOW, PolicyConfig(ordering="fifo", contract=False))
    assert order(result) == [2, 1]


def test_unknown_allocations_and_zero_budget_subtrees_are_unfunded():
    budget_tree = tree(("org", None, 10), ("org/off", "org", 0), ("org/off/child", "org/off", 5))
    fair_tree = FairTree(budget_tree, {}, {}, ["elsewhere"])
    assert fair_tree.funded == frozenset({"org"})
    assert fair_tree.key("elsewhere") == (0.0, 0.0)
