"""Preemption's shortcuts decide exactly what the whole victim order would: a gang's bound, which
judges one allocation at a time and only when asked, counts the nodes that the full ``allowed``
map, worked out afresh at that moment, would let it clear (hypothesis, a scripted case and a
simulated day, where most gangs are rejected by that bound)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest.mock import patch

import pytest
from hypothesis import given

from scheduling.policy import PolicyConfig, plan
from scheduling.policy.planner import _Pass
from scheduling.policy.victims import VictimOrders, _Order
from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
from tests.policy.builders import NOW, nodes, pending, running, snapshot, tree
from tests.policy.test_properties import SETTINGS, snapshots


@contextmanager
def bounds_checked() -> Iterator[list[int]]:
    """Every ``reachable`` count checked against ``allowed_allocations`` of a fresh order for
    the same workload, in the pass as it is at that moment; yields the counts seen."""
    seen: list[int] = []
    original = VictimOrders.reachable

    def checked(self: VictimOrders, order: _Order, needs: dict) -> int:
        counted = original(self, order, needs)
        keys = self.allowed_allocations(_Order(order.workload, self.changes.generation)).keys()
        assert counted == sum(nodes for allocations, nodes in needs.items() if allocations <= keys)
        seen.append(counted)
        return counted

    with patch.object(VictimOrders, "reachable", checked):
        yield seen


def gang_case():
    """Two 8-GPU nodes filled by over-served ``org/b``, two by barely used ``org/c``: a 16-GPU gang
    of unused ``org/a`` may clear b's nodes only."""
    return snapshot(
        tree(("org", None, 100), ("org/a", "org", 30), ("org/b", "org", 30), ("org/c", "org", 30)),
        nodes(4),
        run=[
            running(101, "org/b", {"n0": 8}),
            running(102, "org/b", {"n1": 8}),
            running(103, "org/c", {"n2": 8}),
            running(104, "org/c", {"n3": 8}),
        ],
        queue=[pending(1, "org/a", 16), pending(2, "org/a", 32)],
        usage={"org/b": 1e9, "org/c": 1e3},
    )


def test_a_gang_takes_the_nodes_of_the_over_served_allocation_its_bound_counted():
    with bounds_checked() as seen:
        result = plan(gang_case(), NOW, PolicyConfig(), explain=False)
    assert seen and max(seen) == 2
    assert sorted(p.workload_id for p in result.preemptions) == [101, 102]
    assert [start.workload_id for start in result.starts] == [1]


@given(snapshots())
@SETTINGS
def test_a_gang_bound_counts_what_the_whole_allowed_map_would_count(state):
    with bounds_checked():
        plan(state, NOW, PolicyConfig(), explain=False)
        plan(state, NOW, PolicyConfig(settle=False))


def test_over_a_simulated_day_every_gang_bound_counts_what_the_whole_allowed_map_would_count():
    inputs = ai2_scenario(Ai2Parameters(days=0.5, seed=1, warmup_days=1.0))
    with bounds_checked() as seen:
        run_simulation(inputs, policy="fairshare")
    assert len(seen) > 50  # the check ran on enough bounds to mean something


def test_an_order_is_not_read_once_the_standing_it_was_made_in_changed():
    state = gang_case()
    walk = _Pass(state, NOW, PolicyConfig(), None, explain=False)
    walk._rank()
    walk._index()
    victims = walk.preemptor.victims
    order = victims.victim_order(state.pending[0], False)
    assert victims.victim_order(state.pending[1], False) is order  # its key's first workload decides
    walk.changes.took()
    assert victims.victim_order(state.pending[0], False) is not order
    with pytest.raises(AssertionError):
        victims.allowed(order)
