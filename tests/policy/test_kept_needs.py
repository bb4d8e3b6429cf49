"""Node needs read off what earlier passes kept (``Preemptor._kept_node_needs``) are, pass after
pass, what working every occupied node out afresh gives: through starts and evictions in the pass,
work that ended or started between passes, protection that ran out, and configs that shield or
not (simulated days under fair share, whose passes carry their filing)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from unittest.mock import patch

import pytest

from scheduling.policy import PlanningSession, PolicyConfig, plan
from scheduling.policy.node_keys import KeptNeeds
from scheduling.policy.preempting import Preemptor
from scheduling.simulator import policy_config, run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
from tests.policy.builders import NOW, nodes, pending, running, snapshot, tree


@contextmanager
def needs_checked() -> Iterator[list[tuple[int, int]]]:
    """Every kept read checked against the afresh one; yields (nodes kept, nodes read) per read."""
    seen: list[tuple[int, int]] = []
    original = Preemptor._kept_node_needs

    def checked(self: Preemptor, kept: KeptNeeds) -> dict:
        before = len(kept.settled) + len(kept.blocked)
        needs = original(self, kept)
        self.node_needs, self.capacity.kept_needs = None, None
        try:
            assert needs == self.needs_by_node()
        finally:
            self.node_needs, self.capacity.kept_needs = needs, kept
        seen.append((before, len(needs)))
        return needs

    with patch.object(Preemptor, "_kept_node_needs", checked):
        yield seen


@pytest.mark.parametrize("contract", [True, False])
def test_kept_node_needs_are_what_working_them_out_afresh_gives_pass_after_pass(contract):
    inputs = ai2_scenario(Ai2Parameters(days=0.5, seed=1, warmup_days=1.0))
    config = replace(policy_config("fairshare"), contract=contract)
    with needs_checked() as seen:
        run_simulation(inputs, config=config)
    assert len(seen) > 50 and sum(before for before, _ in seen) > sum(read for _, read in seen) // 2


def test_a_plan_not_applied_leaves_nothing_kept_from_the_nodes_it_changed():
    """The same running work planned again (the plan not applied): a one-node preemption evicts
    b's two-node job and lands on n0, leaving n1 to c's job; the gang after it reads n1's need
    from the pass's own lists, which must not be kept, for the next passes (the gang alone)
    still see b's job there."""
    state = snapshot(
        tree(("org", None, 100), ("org/a", "org", 30), ("org/b", "org", 30), ("org/c", "org", 30)),
        nodes(2),
        run=[running(101, "org/b", {"n0": 4, "n1": 4}), running(102, "org/c", {"n1": 4})],
        queue=[pending(1, "org/a", 8), pending(2, "org/a", 16)],
        usage={"org/b": 1e9},  # c, barely served, may not be preempted by a
    )
    session = PlanningSession()
    with needs_checked() as seen:
        gang_only = replace(state, pending=state.pending[1:])  # the same running objects
        before = [plan(gang_only, NOW, PolicyConfig(), session=session) for _ in range(2)]  # 2nd carried
        evicting = plan(state, NOW, PolicyConfig(), session=session)
        after = [plan(gang_only, NOW, PolicyConfig(), session=session) for _ in range(2)]
    assert evicting.preemptions and not any(result.preemptions for result in before + after)
    assert len(seen) == 4 and seen[-1][0] == 2
