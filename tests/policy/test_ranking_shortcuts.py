"""The ranking's shortcuts give what the plain way gives, to the last bit.

- ``charge_running`` skips, by bisection, the running work (listed in start order) that owes nothing;
- the tree makes its usage when first read, charging the running work only then;
- ``base_ratio`` is worked out when first read, from the standing before any charge;
- both fair-share queues come from one walk over the groups.
Each is compared with the way it replaced, on random inputs and on whole plans."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from benchmarks.policy_pass import build_snapshot
from scheduling.policy import PolicyConfig, plan, ranking
from scheduling.policy.queues import FairShareQueue
from scheduling.policy.ranking import FairTree
from tests.policy.builders import HOUR, NOW, SMALL_TREE, running

CHARGE_S = HOUR
PATHS = [
    "org",
    "org/a",
    "org/b",
    "org/a/x",
    "org/a/y",
    "org/b/z",
    "elsewhere",
]  # "elsewhere": not in the tree


def random_running(rng: random.Random, count: int) -> list:
    """Running work whose start times cluster around ``NOW - CHARGE_S`` (owing or not), some ties."""
    starts = [
        NOW - CHARGE_S + rng.choice([-1.0, 0.0, 1.0, rng.uniform(-2, 1)]) * CHARGE_S for _ in range(count)
    ]
    return [
        running(
            i,
            rng.choice(PATHS),
            {"n0": rng.choice([0, 1, 8])},
            user=rng.choice(["alice", "bob", "charlie"]),
            started_at=started,
        )
        for i, started in enumerate(starts)
    ]


def random_standing(rng: random.Random) -> tuple[dict, dict]:
    usage = {path: rng.uniform(0, 1e7) / 3 for path in PATHS if rng.random() < 0.8}
    user_usage = {(path, user): rng.uniform(0, 1e6) / 7 for path in PATHS for user in ("alice", "bob")}
    return usage, user_usage


def charged_one_by_one(usage: dict, user_usage: dict, work: list) -> FairTree:
    """The plain way: read the usage at once, then ``charge`` every workload what it owes, in order."""
    fair_tree = FairTree(SMALL_TREE, usage, user_usage, PATHS)
    _ = fair_tree.subtree_usage
    charge_one_by_one(fair_tree, work, NOW)
    return fair_tree


def charge_one_by_one(fair_tree: FairTree, work: list, now: float) -> None:
    for workload in work:
        owed = workload.gpus * max(0.0, CHARGE_S - (now - workload.started_at))
        if owed:
            fair_tree.charge(workload.allocation, workload.user, owed)


def standing(fair_tree: FairTree) -> tuple:
    """Everything charging changes, floats as their exact text (0.0 and -0.0 differ)."""
    return (
        {path: repr(used) for path, used in fair_tree.subtree_usage.items()},
        {key: repr(used) for key, used in fair_tree.user_usage.items()},
        fair_tree.user_log,
    )


@pytest.mark.parametrize("in_start_order", [True, False], ids=["listed in start order", "in any order"])
@pytest.mark.parametrize("seed", range(20))
def test_running_work_is_charged_as_one_charge_per_workload_in_order(seed, in_start_order):
    rng = random.Random(seed)
    usage, user_usage = random_standing(rng)
    work = random_running(rng, rng.randrange(0, 40))
    if in_start_order:
        work.sort(key=lambda workload: workload.started_at)
    fair_tree = FairTree(SMALL_TREE, usage, user_usage, PATHS)
    fair_tree.charge_running(tuple(work), NOW, CHARGE_S)
    assert standing(fair_tree) == standing(charged_one_by_one(usage, user_usage, work))


@pytest.mark.parametrize(
    "starts",
    [
        pytest.param([NOW, math.nan, NOW - 2 * CHARGE_S], id="a NaN between an owing and a paid-off start"),
        pytest.param([NOW, math.inf, NOW - 2 * CHARGE_S], id="an infinite start"),
        pytest.param([NOW - 2 * CHARGE_S, NOW - CHARGE_S, NOW - CHARGE_S], id="owing exactly nothing"),
        pytest.param([NOW + CHARGE_S, NOW + 2 * CHARGE_S], id="starts after now"),
        pytest.param([], id="nothing running"),
    ],
)
def test_start_times_that_do_not_sort_plainly_are_charged_one_by_one(starts):
    work = [running(i, "org/a/x", {"n0": 8}, started_at=started) for i, started in enumerate(starts)]
    fair_tree = FairTree(SMALL_TREE, {"org/a/x": 5.0}, {})
    fair_tree.charge_running(tuple(work), NOW, CHARGE_S)
    plain = FairTree(SMALL_TREE, {"org/a/x": 5.0}, {})
    for workload in work:
        left = CHARGE_S - (NOW - workload.started_at)
        if left > 0.0:
            plain.charge(workload.allocation, workload.user, workload.gpus * left)
    assert standing(fair_tree) == standing(plain)


@pytest.mark.parametrize("seed", range(10))
def test_usage_made_on_first_read_is_the_usage_charged_at_once(seed):
    rng = random.Random(seed)
    usage, user_usage = random_standing(rng)
    work = sorted(random_running(rng, 30), key=lambda workload: workload.started_at)
    at_once = FairTree(SMALL_TREE, usage, user_usage, PATHS)
    _ = at_once.user_log  # any usage attribute makes them all
    deferred = FairTree(SMALL_TREE, usage, user_usage, PATHS)
    for fair_tree in (at_once, deferred):
        fair_tree.charge_running(tuple(work), NOW, CHARGE_S)
        fair_tree.charge_running(tuple(work[-5:]), NOW + 60.0, CHARGE_S)  # charged after the first call
        fair_tree.charge("org/b/z", "alice", 1234.5)  # after the running work, read or not
    plain = charged_one_by_one(usage, user_usage, work)
    charge_one_by_one(plain, work[-5:], NOW + 60.0)
    plain.charge("org/b/z", "alice", 1234.5)
    assert standing(deferred) == standing(at_once) == standing(plain)
    assert deferred.version == at_once.version


def test_running_work_is_charged_as_it_was_when_charge_running_was_called():
    work = [running(1, "org/a/x", {"n0": 8}, started_at=NOW - 60.0)]
    fair_tree = FairTree(SMALL_TREE, {}, {})
    fair_tree.charge_running(work, NOW, CHARGE_S)
    work.append(running(2, "org/b/z", {"n0": 8}, started_at=NOW - 60.0))  # the caller's list changes later
    assert fair_tree.subtree_usage["org/b/z"] == 0.0
    assert fair_tree.subtree_usage["org/a/x"] == 8 * (CHARGE_S - 60.0)


@pytest.mark.parametrize("seed", range(10))
def test_base_ratio_is_the_standing_before_any_charge_whenever_it_is_read(seed):
    rng = random.Random(seed)
    usage, user_usage = random_standing(rng)
    before = FairTree(SMALL_TREE, usage, user_usage, PATHS).fair_share_ratios()
    fair_tree = FairTree(SMALL_TREE, usage, user_usage, PATHS)
    fair_tree.charge_running(tuple(random_running(rng, 20)), NOW, CHARGE_S)
    fair_tree.charge("org/a/x", "bob", 1e6)
    assert dict(fair_tree.base_ratio) == before
    assert list(fair_tree.base_ratio) == list(before)  # path order too
    fair_tree.charge("org/b/z", "bob", 1e6)  # read once: kept as it was
    assert dict(fair_tree.base_ratio) == before


@pytest.mark.parametrize("seed", range(10))
def test_funded_and_unfunded_queues_are_the_queues_built_apart(seed):
    rng = random.Random(seed)
    fair_tree = FairTree(SMALL_TREE, {}, {}, PATHS)
    groups = {
        (rng.choice(PATHS), rng.choice(["alice", "bob", "charlie", "dave"])): [object()] * rng.randrange(1, 4)
        for _ in range(rng.randrange(0, 20))
    }
    both = FairShareQueue.funded_and_unfunded(fair_tree, groups)
    apart = [
        FairShareQueue(
            fair_tree, {key: queue for key, queue in groups.items() if key[0] in fair_tree.funded}
        ),
        FairShareQueue(
            fair_tree, {key: queue for key, queue in groups.items() if key[0] not in fair_tree.funded}
        ),
    ]
    for made, expected in zip(both, apart, strict=True):
        assert [(a, list(users.items())) for a, users in made.by_allocation.items()] == [
            (a, list(users.items())) for a, users in expected.by_allocation.items()
        ]
        assert made.counts == expected.counts


def plain_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the shortcuts: charge every running workload at once, walking all of them."""
    monkeypatch.setattr(ranking, "_still_owing", lambda running, now, projected_charge_s, ordered: running)
    charge_running = FairTree.charge_running

    def at_once(self, running, now, projected_charge_s, ordered=ranking.in_start_order):
        _ = self.subtree_usage
        charge_running(self, running, now, projected_charge_s, ordered)

    monkeypatch.setattr(FairTree, "charge_running", at_once)


@pytest.mark.parametrize("seed", range(6))
def test_plans_are_those_of_the_plain_ranking(seed, monkeypatch):
    snapshot = build_snapshot(pending=150 + 40 * seed, nodes=20 + 7 * seed, seed=seed, busy=0.9)
    # In start order, as the simulator lists running work, so the bisection has work to skip;
    # the start times spread over the projected charge so some still owe
    started = sorted(NOW - (i * 97 % 40) * 300.0 for i in range(len(snapshot.running)))
    snapshot = replace(
        snapshot,
        running=tuple(
            replace(w, started_at=at, protected_until=at)
            for w, at in zip(snapshot.running, started, strict=True)
        ),
    )
    config = PolicyConfig(projected_charge_s=2 * HOUR)
    fast = [plan(snapshot, NOW, config, explain=explain) for explain in (True, False)]
    with monkeypatch.context() as patched:
        plain_ranking(patched)
        plain = [plan(snapshot, NOW, config, explain=explain) for explain in (True, False)]
    for made, expected in zip(fast, plain, strict=True):
        assert (made.starts, made.preemptions, made.reservations, made.reasons) == (
            expected.starts,
            expected.preemptions,
            expected.reservations,
            expected.reasons,
        )
        assert dict(made.fair_share) == dict(expected.fair_share)
