"""The pass's shortcuts give exactly what the plain path gives (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given
from hypothesis import strategies as st

from scheduling.policy import PolicyConfig, plan
from scheduling.policy.grouping import SUBMIT_ORDER, group_pending, swap_grouped
from scheduling.policy.options import _variants
from scheduling.policy.planner import plan_grouped
from tests.policy.test_properties import NOW, SETTINGS, snapshots


@given(snapshots())
@SETTINGS
def test_grouping_gives_the_same_submit_ordered_queues_whether_or_not_the_input_is_sorted(state):
    shuffled, *_ = group_pending(state.pending)
    ordered, *_ = group_pending(tuple(sorted(state.pending, key=SUBMIT_ORDER)))
    assert shuffled == ordered
    for queue in ordered.values():
        assert queue == sorted(queue, key=SUBMIT_ORDER)


@given(snapshots(), st.data(), st.sampled_from(["fairshare", "priority", "fifo"]))
@SETTINGS
def test_a_variant_planned_from_the_shared_grouping_gets_the_same_plan_as_one_regrouped(
    state, data, ordering
):
    queued = [workload for workload in state.pending if not workload.held]
    assume(queued)
    workload = data.draw(st.sampled_from(queued))
    label, changes = data.draw(st.sampled_from([("as it is", {}), *_variants(state, workload)]))
    variant = replace(workload, **changes)
    changed = replace(state, pending=tuple(variant if w.id == workload.id else w for w in state.pending))
    config = PolicyConfig(ordering=ordering)
    shared = plan_grouped(changed, NOW, config, swap_grouped(group_pending(state.pending), workload, variant))
    regrouped = plan(changed, NOW, config)
    assert (shared.starts, shared.preemptions, shared.reservations, shared.reasons, shared.fair_share) == (
        regrouped.starts,
        regrouped.preemptions,
        regrouped.reservations,
        regrouped.reasons,
        regrouped.fair_share,
    ), label
