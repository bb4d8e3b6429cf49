"""start_options, cut short where exact (one reason explained, a variant stopped once its workload
starts), returns exactly what planning every variant in full with plan() and reading the full
reasons returns."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scheduling.policy import PolicyConfig, plan, start_options
from scheduling.policy.options import AS_IT_IS, UNFUNDED_ALLOCATION, StartOption, decide_start_options
from scheduling.policy.reasons import gpus_phrase
from tests.policy.builders import HOUR, NOW, nodes, pending, running, snapshot, tree
from tests.policy.test_properties import SETTINGS, snapshots

TREE = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 10))
USAGE = {"org/a": 1e5, "org/b": 1e7}
CONFIG = PolicyConfig()


def straightforward(state, workload_id, now, config):
    """The options as the issue states them: plan() each variant in full, read the full reasons."""
    workload = next((w for w in state.pending if w.id == workload_id), None)
    if workload is None or workload.held:
        return None, ()

    def decide(label, changes):
        variant = replace(workload, **changes)
        pending = tuple(variant if w.id == workload_id else w for w in state.pending)
        result = plan(replace(state, pending=pending), now, config)
        if workload_id in {start.workload_id for start in result.starts}:
            return StartOption(label, changes, True, None, None)
        reason = next((r for r in result.reasons if r.workload_id == workload_id), None)
        if reason is None:
            return StartOption(label, changes, False, None, None)
        return StartOption(label, changes, False, reason.estimated_start, reason.code)

    baseline = decide(AS_IT_IS, {})
    if baseline.starts_now:
        return baseline, ()
    variants = []
    gpus = workload.gpus // 2
    while gpus >= 1:
        per_node = workload.gpus_per_node
        per_node = per_node if per_node and gpus % per_node == 0 else None
        variants.append((f"with {gpus_phrase(gpus)}", {"gpus": gpus, "gpus_per_node": per_node}))
        gpus //= 2
    if workload.min_runtime_s > 0:
        variants.append(("with minimum runtime 0", {"min_runtime_s": 0.0}))
    variants.append(("unfunded (opportunistic)", {"allocation": UNFUNDED_ALLOCATION, "min_runtime_s": 0.0}))
    types = sorted({node.gpu_type for node in state.nodes if node.healthy} - {workload.gpu_type})
    variants.extend((f"on {gpu_type}", {"gpu_type": gpu_type}) for gpu_type in types)
    options = [decide(label, changes) for label, changes in variants]
    kept = tuple(
        option
        for option in options
        if option.starts_now
        or (
            option.estimated_start is not None
            and (baseline.estimated_start is None or option.estimated_start < baseline.estimated_start)
        )
    )
    return baseline, kept


def assert_same(state, config=CONFIG, now=NOW):
    planned = plan(state, now, config)  # what a caller planning many workloads' options passes
    for workload in state.pending:
        expected = straightforward(state, workload.id, now, config)
        assert decide_start_options(state, workload.id, now, config) == expected, workload.id
        assert decide_start_options(state, workload.id, now, config, as_planned=planned) == expected
        assert start_options(state, workload.id, now, config) == expected[1]
    assert decide_start_options(state, -1, now, config) == (None, ())


@given(snapshots(), st.sampled_from(["fairshare", "fairshare", "priority", "fifo"]))
@SETTINGS
def test_random_snapshots_give_exactly_the_straightforward_options(state, ordering):
    assert_same(state, PolicyConfig(ordering=ordering))


def test_variants_that_start_by_preempting_stop_early_with_the_same_answer():
    run = [
        running(10, "org/b", {"n0": 8}, started_at=NOW - HOUR),
        running(11, "org/b", {"n1": 4}, protected_until=NOW + HOUR),
        running(12, "org/b", {"n1": 4}, started_at=NOW - 3 * HOUR),
    ]
    queue = [
        pending(1, "org/a", 16),
        pending(2, "org/a", 8, min_runtime_s=4 * HOUR),
        pending(3, "org/b", 4, user="bob"),
        pending(4, "org/a", 16, gpus_per_node=8),
    ]
    state = snapshot(
        TREE, nodes(2) + nodes(1, gpu_type="A100", prefix="a"), run=run, queue=queue, usage=USAGE
    )
    assert_same(state)


def test_a_settling_walk_start_and_the_reserved_job_give_the_same_answer():
    run = [
        running(10, "org/b", {"n0": 4}, protected_until=NOW + 2 * HOUR),
        running(11, "org/b", {"n1": 4}, protected_until=NOW + HOUR, expected_end=NOW + HOUR),
    ]
    queue = [
        pending(1, "org/a", 16),
        pending(2, "org/a", 4, min_runtime_s=4 * HOUR),
        pending(3, "org/b", 2, user="bob", max_runtime_s=HOUR),
    ]
    state = snapshot(TREE, nodes(2), run=run, queue=queue, usage=USAGE)
    assert_same(state)
