"""A victim pool works each part out only when a shape first reads it, and a one-node bound stops
at the first node that reaches: every verdict and every part is what building the whole pool
eagerly, as it was built before, gives (a scripted gang and a simulated stretch of a busy day)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from unittest.mock import patch

from scheduling.policy import PolicyConfig, plan
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.preemption import VictimPool
from scheduling.policy.types import RunningWorkload
from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
from tests.policy.builders import NOW
from tests.policy.test_preempting import gang_case


def eager(ordered: Sequence[RunningWorkload], index: FreeIndex, occupants: Mapping) -> tuple:
    """(rank, best one node, whole nodes, clearable): the pool as built in full up front."""
    rank = {victim.id: position for position, victim in enumerate(ordered)}
    freeable: dict[str, int] = {}
    for victim in ordered:
        for name, gpus in victim.placement:
            if name in index.free:
                freeable[name] = freeable.get(name, 0) + gpus
    best: dict[str, int] = {}
    whole: dict[tuple[str, int], int] = {}
    clearable: list = []
    for name in sorted(freeable):
        spec = index.spec[name]
        total = index.free[name] + freeable[name]
        best[spec.gpu_type] = max(best.get(spec.gpu_type, total), total)
        on_node = occupants.get(name, ())
        if index.free[name] < spec.gpus and on_node:
            ranks = [rank.get(occupant.id) for occupant in on_node]
            if None not in ranks:
                key = (spec.gpu_type, spec.gpus)
                whole[key] = whole.get(key, 0) + 1
                clearable.append((max(ranks), name, list(on_node)))
    for (kind, size, _), names in index.whole.items():
        whole[(kind, size)] = whole.get((kind, size), 0) + len(names)
    return rank, best, whole, clearable


def eager_hopeless(shape: Shape, index: FreeIndex, parts: tuple) -> bool:
    gpus, per_node, gpu_type = shape
    _, best, whole, _ = parts
    if per_node is not None and per_node < gpus and per_node != index.largest(gpu_type):
        return False
    if (per_node is None or per_node >= gpus) and index.largest(gpu_type) >= gpus:
        return all(most < gpus for kind, most in best.items() if gpu_type in (None, kind))
    return not any(
        count * size >= gpus and gpus % size == 0 and per_node in (None, size)
        for (kind, size), count in whole.items()
        if gpu_type in (None, kind)
    )


@contextmanager
def pools_checked() -> Iterator[list[bool]]:
    """Every ``hopeless`` verdict, and then every part of its pool, checked against the eager
    pool; yields the verdicts seen."""
    seen: list[bool] = []
    original = VictimPool.hopeless

    def checked(pool: VictimPool, shape: Shape, index: FreeIndex) -> bool:
        parts = eager(pool.ordered, index, pool._occupants) if pool.ordered else None
        verdict = original(pool, shape, index)  # first: the lazy path as the pass takes it
        if parts is not None:
            assert verdict == eager_hopeless(shape, index, parts)
            assert (pool.rank, pool.best_one_node, pool.whole_nodes, pool.clearable) == parts
        seen.append(verdict)
        return verdict

    with patch.object(VictimPool, "hopeless", checked):
        yield seen


def test_a_gang_s_pool_is_what_the_eager_pool_was():
    with pools_checked() as seen:
        result = plan(gang_case(), NOW, PolicyConfig())
    assert seen and result.starts


def test_over_a_busy_stretch_every_pool_verdict_and_part_is_what_the_eager_pool_gave():
    inputs = ai2_scenario(Ai2Parameters(days=0.5, seed=1, warmup_days=1.0))
    with pools_checked() as seen:
        run_simulation(inputs, policy="fairshare")
    assert True in seen and False in seen
