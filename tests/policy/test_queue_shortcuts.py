"""The fair-share queue's shortcuts give what the plain way gives.

- ``skip`` takes what ``head`` and ``consumed`` would, one user queue at a time: the walk skips
  whole user queues of workloads like ones that already failed, and the queue must serve the rest
  exactly as if each had been handed out and drained (same order, same counts), also when the
  standing changes between skips;
- each side of the funded and unfunded pair names its funded allocations without a filter."""

from __future__ import annotations

import random

import pytest

from scheduling.policy.queues import FairShareQueue
from scheduling.policy.ranking import FairTree
from tests.policy.builders import SMALL_TREE

PATHS = ["org", "org/a", "org/b", "org/a/x", "org/a/y", "org/b/z", "elsewhere"]
USERS = ["alice", "bob", "charlie", "dave", "erin"]


def take_by_head(queue: FairShareQueue, passed_over, enough: float) -> int:
    """What ``skip`` replaces: hand out each user queue, drain it and report it consumed."""
    taken = 0
    while True:
        head = queue.head()
        if head is None or not passed_over(head[2]):
            return taken
        count = len(head[2])
        head[2].clear()
        queue.consumed(count)
        taken += count
        if taken >= enough:
            return taken


def served(queue: FairShareQueue) -> tuple | None:
    head = queue.head()
    return None if head is None else (head[0], head[1], list(head[2]), dict(queue.counts))


@pytest.mark.parametrize("seed", range(60))
def test_skipping_serves_what_handing_out_each_user_queue_serves(seed):
    rng = random.Random(seed)
    usage = {path: rng.choice([0.0, 10.0, 50.0]) for path in PATHS if rng.random() < 0.5}
    user_usage = {(path, user): rng.choice([0.0, 5.0, 5.0, 9.0]) for path in PATHS for user in USERS}
    groups = {
        (rng.choice(PATHS), user): [rng.randrange(100) for _ in range(rng.randrange(1, 4))]
        for user in USERS
        for _ in range(rng.randrange(0, 4))
    }
    trees = [FairTree(SMALL_TREE, usage, user_usage, PATHS) for _ in range(2)]
    skipping, plain = (FairShareQueue(fair_tree, groups) for fair_tree in trees)
    original = {key: list(queue) for key, queue in groups.items()}

    def passed_over(workloads) -> bool:
        return all(workload % 4 for workload in workloads)

    while True:
        enough = rng.choice([1, 3, 32, float("inf")])
        assert skipping.skip(passed_over, enough) == take_by_head(plain, passed_over, enough)
        assert served(skipping) == served(plain)
        if skipping.head() is None:
            break
        for queue in (skipping, plain):  # the walk takes one workload (a miss) ...
            queue.head()[2].popleft()
            queue.consumed(1)
        if rng.random() < 0.6:  # ... which sometimes starts and is charged (or usage changes unseen)
            allocation, user = rng.choice([*groups, (rng.choice(PATHS), rng.choice(USERS))])
            amount = rng.choice([1.0, 20.0])
            rechoose = rng.random() < 0.8
            for fair_tree, queue in zip(trees, (skipping, plain), strict=True):
                fair_tree.charge(allocation, user, amount)
                if rechoose:
                    queue.charged()
    assert groups == original  # the caller's lists are never changed


def test_after_usage_changed_under_a_half_taken_user_the_next_one_is_chosen_afresh():
    fair_tree = FairTree(SMALL_TREE, {"org/b/z": 100.0}, {}, PATHS)
    groups = {("org/a/x", "alice"): [4, 1], ("org/a/x", "bob"): [1], ("org/b/z", "carol"): [4]}
    queue = FairShareQueue(fair_tree, groups)
    assert queue.head()[:2] == ("org/a/x", "alice")
    queue.head()[2].popleft()  # the walk takes a workload that fails ...
    queue.consumed(1)
    fair_tree.charge("org/a/x", "alice", 1e6)  # ... while org/a/x's usage grows (no start)

    def passed_over(workloads) -> bool:
        return all(workload % 4 for workload in workloads)

    assert queue.skip(passed_over, float("inf")) == 1  # alice's rest; then org/b/z ranks first
    assert queue.head()[:2] == ("org/b/z", "carol")


def test_a_user_charged_since_the_allocations_users_were_ordered_takes_its_new_place():
    user_usage = {("org/a/x", "alice"): 0.0, ("org/a/x", "bob"): 5.0, ("org/a/x", "carol"): 9.0}
    user_usage[("org/a/x", "dave")] = 12.0
    fair_tree = FairTree(SMALL_TREE, {}, user_usage, PATHS)
    groups = {("org/a/x", user): [1] for user in ("alice", "bob", "carol")}
    groups[("org/a/x", "dave")] = [4]
    queue = FairShareQueue(fair_tree, groups)
    assert queue.head()[1] == "alice"  # the users are ordered ...
    fair_tree.charge("org/a/x", "carol", 20.0)  # ... and then carol's usage grows past dave's
    queue.charged()

    def passed_over(workloads) -> bool:
        return all(workload % 4 for workload in workloads)

    assert queue.skip(passed_over, float("inf")) == 2  # alice, bob; dave (then carol) is next
    assert queue.head()[1] == "dave"


@pytest.mark.parametrize("seed", range(10))
def test_each_side_of_a_pair_names_its_funded_allocations_as_a_filter_would(seed):
    rng = random.Random(seed)
    fair_tree = FairTree(SMALL_TREE, {}, {}, PATHS)
    groups = {(rng.choice(PATHS), user): [1] for user in USERS for _ in range(rng.randrange(0, 4))}
    for queue in [*FairShareQueue.funded_and_unfunded(fair_tree, groups), FairShareQueue(fair_tree, groups)]:
        expected = [allocation for allocation in queue.allocations() if allocation in fair_tree.funded]
        assert queue.funded_allocations() == expected
