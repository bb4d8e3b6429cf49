"""The engine keeps the pending queue grouped as the policy groups it, and hands it to every pass.

A grouping that drifted from ``group_pending`` (a workload missing, out of order, a key in another
place) would change whom the scheduler starts, so it is compared pass by pass, and whole runs are
compared with runs that let the policy group from scratch.
"""

from __future__ import annotations

import copy
import functools
import random
from dataclasses import replace

import pytest

from benchmarks import policy_pass
from scheduling.policy import PendingWorkload, plan
from scheduling.policy.grouping import group_pending
from scheduling.policy.planner import plan_grouped
from scheduling.simulator import POLICIES, run_simulation
from scheduling.simulator import engine as engine_module
from scheduling.simulator.pending import PendingGroups
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario

# a small lab that still preempts, requeues, cancels impatient work and loses nodes
SMALL_LAB = Ai2Parameters(
    days=0.5, seed=3, nodes=12, teams=5, researchers=30, warmup_days=0.5, node_mtbf_days=2.0,
    unfunded_patience_h=2.0,
)  # fmt: skip


def _workload(id: int, user: str, submitted_at: float, *, allocation: str = "lab/a", held: bool = False):
    return PendingWorkload(
        id=id, allocation=allocation, user=user, gpus=1, submitted_at=submitted_at, held=held
    )


def _grouping(grouped):
    """Everything of a ``Grouped`` that the policy may read, in order."""
    groups, held, kinds = grouped
    by_kind = {
        allocation: {kind: sorted(of_kind) for kind, of_kind in by_kind.items()}
        for allocation, by_kind in kinds.items()
    }
    return (
        [(key, [workload.id for workload in queue]) for key, queue in groups.items()],
        [w.id for w in held],
        by_kind,
    )


def test_a_key_moves_back_when_its_first_queued_workload_leaves():
    """group_pending orders keys by their first workload in the pending order, not by age."""
    queue = PendingGroups()
    a1, b1, a2 = _workload(1, "ann", 10.0), _workload(2, "bob", 20.0), _workload(3, "ann", 30.0)
    for workload in (a1, b1, a2):
        queue.add(workload)
    queue.remove(a1)

    assert list(queue.grouped()[0]) == [("lab/a", "bob"), ("lab/a", "ann")]
    assert _grouping(queue.grouped()) == _grouping(group_pending([b1, a2]))


@pytest.mark.parametrize("seed", range(5))
def test_any_sequence_of_queueing_and_leaving_groups_like_group_pending(seed):
    """Arrivals out of submit order, submit-time ties, held work, requeues of the same workload."""
    rng = random.Random(seed)
    workloads = [
        _workload(
            id,
            rng.choice(["ann", "bob", "cy"]),
            float(rng.randrange(20)),
            allocation=rng.choice(["lab/a", "lab/b"]),
            held=rng.random() < 0.1,
        )
        for id in rng.sample(range(1000), 40)
    ]
    queue, pending = PendingGroups(), {}
    for _ in range(400):
        if pending and rng.random() < 0.45:
            workload = pending.pop(rng.choice(list(pending)))
            queue.remove(workload)
        else:
            workload = rng.choice(workloads)
            if workload.id in pending:
                continue
            pending[workload.id] = workload
            queue.add(workload)
        assert _grouping(queue.grouped()) == _grouping(group_pending(tuple(pending.values())))


def test_leaving_without_having_queued_is_refused():
    queue = PendingGroups()
    queue.add(_workload(1, "ann", 10.0))

    with pytest.raises(ValueError, match="not queued"):
        queue.remove(_workload(2, "ann", 10.0))


@pytest.mark.parametrize("policy", POLICIES)
def test_every_pass_gets_the_grouping_of_its_snapshot_and_leaves_it_unchanged(policy, monkeypatch):
    passes, reordered = [], []
    grouped_of = PendingGroups.grouped

    def watch_grouping(self):
        reordered.append(self._reorder)
        return grouped_of(self)

    def checked_plan_grouped(snapshot, now, config, grouped, *, session=None, explain):
        assert _grouping(grouped) == _grouping(group_pending(snapshot.pending))
        before = (
            copy.copy(grouped[0]),
            {key: list(queue) for key, queue in grouped[0].items()},
            list(grouped[1]),
        )
        result = plan_grouped(snapshot, now, config, grouped, session=session, explain=explain)
        groups, lists, held = before
        # the engine hands over its own lists: the pass must not change them (plan_grouped's contract)
        assert list(grouped[0].items()) == list(groups.items()) and grouped[1] == held
        assert all(queue == lists[key] for key, queue in grouped[0].items())
        scratch = plan(snapshot, now, config, explain=False)
        assert (result.starts, result.preemptions, result.reservations) == (
            scratch.starts,
            scratch.preemptions,
            scratch.reservations,
        )
        passes.append(now)
        return result

    monkeypatch.setattr(PendingGroups, "grouped", watch_grouping)
    monkeypatch.setattr(engine_module, "plan_grouped", checked_plan_grouped)
    summary = run_simulation(ai2_scenario(SMALL_LAB), policy=policy).summary

    assert len(passes) == summary["passes"] > 100
    assert summary["requeues"] > 0 or policy == "fifo"
    assert any(reordered)  # the path that moves a key back was taken


@pytest.mark.parametrize("policy", POLICIES)
def test_a_run_is_the_same_as_with_the_policy_grouping_every_pass_itself(policy):
    inputs = ai2_scenario(SMALL_LAB)
    kept = run_simulation(inputs, policy=policy).summary
    scratch = run_simulation(inputs, policy=policy, planner=functools.partial(plan, explain=False)).summary

    def decisions(summary: dict) -> dict:
        return {
            key: value
            for key, value in summary.items()
            if key != "sim_wall_s" and not key.startswith("plan_")
        }

    assert decisions(kept) == decisions(scratch)


@pytest.mark.parametrize("explain", [True, False, "one"])
def test_a_pass_never_changes_the_grouping_it_is_given(explain):
    """Including the settling walks that requeue preempted victims into a user's queue."""
    state = policy_pass.build_snapshot(400, 12, seed=3)
    for config in (*POLICIES.values(), replace(POLICIES["fairshare"], settle=False)):
        grouped = group_pending(state.pending)
        before = _grouping(grouped), list(map(id, grouped[0].values()))  # kinds compared by content
        wanted = frozenset({state.pending[7].id}) if explain == "one" else explain
        result = plan_grouped(state, 1_000_000.0, config, grouped, explain=wanted)

        assert (_grouping(grouped), list(map(id, grouped[0].values()))) == before
        assert result.starts == plan(state, 1_000_000.0, config, explain=wanted).starts
