"""A pass's first clearable count on an index (one tight loop over every node) gives what the
incremental count gives when every node of the index is counted as changed from nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.policy_pass import NOW, build_snapshot
from scheduling.policy import PlanningSession, PolicyConfig
from scheduling.policy.clearable import _Clearable
from scheduling.policy.planner import _Pass


def counted_as_changed(planning: _Pass, index) -> dict:  # noqa: ANN001 - a FreeIndex
    """The incremental branch of ``ClearableNodes.on``, from an empty state with every node changed."""
    state = planning.capacity.clearable.states[index] = _Clearable()
    state.relief = planning.changes.relief - 1  # stale: ``ClearableNodes.on`` counts what changed
    state.filed = len(index.filings)
    state.changed = set(index.free)
    return planning.capacity.clearable.on(index, planning.changes.relief, planning.preemptor.needs_by_node)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5], ids=lambda seed: f"seed-{seed}")
@pytest.mark.parametrize("busy", [0.6, 1.0], ids=["some-free", "full"])
def test_the_first_count_equals_counting_every_node_as_changed(seed: int, busy: float) -> None:
    snapshot = build_snapshot(pending=200, nodes=60, seed=seed, busy=busy)
    planning = _Pass(snapshot, NOW, PolicyConfig(), None, explain=False)
    planning._rank()
    planning._index()

    first = planning.capacity.clearable.on(
        planning.capacity.index, planning.changes.relief, planning.preemptor.needs_by_node
    )
    assert first, "the cluster has nodes to count"

    assert counted_as_changed(planning, planning.capacity.index) == first


def _without_empty(found: dict) -> dict:
    """The counts less entries of no nodes (a count carried from an earlier pass drops them)."""
    return {
        key: (whole, {need: nodes for need, nodes in counted.items() if nodes})
        for key, (whole, counted) in found.items()
        if whole or any(counted.values())
    }


@pytest.mark.parametrize("seed", [1, 2, 3], ids=lambda seed: f"seed-{seed}")
def test_a_count_carried_from_an_earlier_pass_equals_counting_afresh(seed: int) -> None:
    """The next pass on the same nodes tuple counts again only the nodes whose free GPUs or need
    changed (here: some work ended, and protection ran out with time) and gets the same counts."""
    earlier = build_snapshot(pending=200, nodes=60, seed=seed, busy=1.0)
    later = replace(earlier, running=tuple(w for at, w in enumerate(earlier.running) if at % 5))

    def first_count(snapshot, now: float, session: PlanningSession) -> tuple[dict, dict]:  # noqa: ANN001
        planning = _Pass(snapshot, now, PolicyConfig(), None, False, session)
        planning._rank()
        planning._index()
        found = planning.capacity.clearable.on(
            planning.capacity.index, planning.changes.relief, planning.preemptor.needs_by_node
        )
        return found, planning.capacity.clearable.states[planning.capacity.index].contributions

    session = PlanningSession()
    first_count(earlier, NOW, session)
    assert session.clearable_count.nodes is earlier.nodes  # carried to the next pass
    for now in (NOW, NOW + 6 * 3600.0):
        afresh = first_count(later, now, PlanningSession())
        first_count(earlier, NOW, session)
        carried = first_count(later, now, session)
        assert _without_empty(carried[0]) == _without_empty(afresh[0])
        assert carried[1] == afresh[1]
