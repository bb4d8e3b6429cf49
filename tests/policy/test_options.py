"""start_options: concrete changes that start a pending workload sooner, each decided by plan()."""

from dataclasses import replace

from scheduling.policy import PolicyConfig, plan, start_options
from tests.policy.builders import HOUR, NOW, nodes, pending, running, snapshot, tree

TREE = tree(("org", None, 20), ("org/a", "org", 10), ("org/b", "org", 10))
USAGE = {"org/a": 1e5, "org/b": 1e7}


def labels(options):
    return [option.label for option in options]


def test_a_workload_that_starts_anyway_has_no_options():
    state = snapshot(TREE, nodes(1), queue=[pending(1, "org/a", 8)])
    assert start_options(state, 1, NOW, PolicyConfig()) == ()


def test_fewer_gpus_fit_what_is_free_now():
    run = [running(10, "org/b", {"n0": 4}, protected_until=NOW + HOUR)]
    state = snapshot(TREE, nodes(1), run=run, queue=[pending(1, "org/a", 8)], usage=USAGE)
    options = start_options(state, 1, NOW, PolicyConfig())
    assert labels(options)[:3] == ["with 4 GPUs", "with 2 GPUs", "with 1 GPU"]
    assert all(option.starts_now for option in options[:3])


def test_another_gpu_type_is_offered_when_its_nodes_are_free():
    cluster = nodes(1) + nodes(1, gpu_type="A100", prefix="a")
    run = [running(10, "org/b", {"n0": 8}, protected_until=NOW + HOUR)]
    state = snapshot(TREE, cluster, run=run, queue=[pending(1, "org/a", 8, gpu_type="H100")], usage=USAGE)
    options = start_options(state, 1, NOW, PolicyConfig())
    assert "on A100" in labels(options)


def test_minimum_runtime_zero_backfills_nodes_reserved_for_a_larger_job():
    run = [
        running(10, "org/b", {"n0": 4}, protected_until=NOW + 2 * HOUR),
        running(11, "org/b", {"n1": 4}, protected_until=NOW + HOUR),
    ]
    queue = [pending(1, "org/a", 16), pending(2, "org/a", 4, min_runtime_s=4 * HOUR)]
    state = snapshot(TREE, nodes(2), run=run, queue=queue, usage=USAGE)
    options = start_options(state, 2, NOW, PolicyConfig())
    assert "with minimum runtime 0" in labels(options)
    assert next(o for o in options if o.label == "with minimum runtime 0").starts_now


def test_each_option_is_what_plan_does_with_that_change():
    run = [
        running(10, "org/b", {"n0": 8}, protected_until=NOW + HOUR),
        running(11, "org/b", {"n1": 4}, protected_until=NOW + HOUR),
    ]
    state = snapshot(TREE, nodes(2), run=run, queue=[pending(1, "org/a", 8)], usage=USAGE)
    options = start_options(state, 1, NOW, PolicyConfig())
    assert options
    for option in options:
        changed = replace(state, pending=(replace(state.pending[0], **option.changes),))
        started = [start.workload_id for start in plan(changed, NOW, PolicyConfig()).starts]
        assert option.starts_now == (1 in started)
