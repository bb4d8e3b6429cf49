"""A pass's first clearable count on an index (one tight loop over every node) gives what the
incremental count gives when every node of the index is counted as changed from nothing."""

from __future__ import annotations

import pytest

from benchmarks.policy_pass import NOW, build_snapshot
from scheduling.policy import PolicyConfig
from scheduling.policy.planner import _Pass
from scheduling.policy.preempting import _Clearable


def counted_as_changed(planning: _Pass, index) -> dict:  # noqa: ANN001 - a FreeIndex
    """The incremental branch of ``_clearable``, from an empty state with every node changed."""
    state = planning.clearable[id(index)] = _Clearable()
    state.relief = planning.relief - 1  # stale: ``_clearable`` counts what changed
    state.filed = len(index.filings)
    state.changed = set(index.free)
    return planning._clearable(index)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5], ids=lambda seed: f"seed-{seed}")
@pytest.mark.parametrize("busy", [0.6, 1.0], ids=["some-free", "full"])
def test_the_first_count_equals_counting_every_node_as_changed(seed: int, busy: float) -> None:
    snapshot = build_snapshot(pending=200, nodes=60, seed=seed, busy=busy)
    planning = _Pass(snapshot, NOW, PolicyConfig(), None, explain=False)
    planning._rank()
    planning._index()

    first = planning._clearable(planning.index)
    assert first, "the cluster has nodes to count"

    assert counted_as_changed(planning, planning.index) == first
