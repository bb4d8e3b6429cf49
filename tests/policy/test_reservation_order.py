"""The release order carried from pass to pass (``reservation.ReleaseOrder``, in a session) gives exactly what a
profile worked out from scratch gives: over a run of passes where the work on nodes changes
(between passes, dropping those nodes' release keys as filing.py does, and within a pass, as
``changed`` nodes), the clock moves, nodes fail and come back, and with new keys every pass as
a live pass has them."""

from __future__ import annotations

import random

import pytest

from scheduling.policy import ClusterNodeSpec, PlanningSession, RunningWorkload
from scheduling.policy.node_keys import ReleaseKeys
from scheduling.policy.reservation import ReleaseProfile
from tests.policy.builders import HOUR, NOW, nodes, running

SHAPES = [
    (8, None, None),  # one node of any type (sizes differ: worked out node by node)
    (8, None, "H100"),  # one whole node, in order
    (4, None, "H100"),
    (16, None, "H100"),  # gangs of whole nodes, in order
    (32, None, "H100"),
    (64, None, "H100"),  # more than any domain has: all domains together
    (200, None, "H100"),  # more than there is: never
    (24, 8, "H100"),
    (8, None, "A100"),  # two of the 4-GPU nodes
    (12, 4, None),
]


def cluster_of(healthy: set[str] | None = None) -> tuple[ClusterNodeSpec, ...]:
    cluster = (
        nodes(7, domain="d0", prefix="a")
        + nodes(7, domain="d1", prefix="b")
        + nodes(3, domain="d2", prefix="c")
        + nodes(3, gpus=4, gpu_type="A100", domain="d2", prefix="x")
    )
    if healthy is None:
        return cluster
    return tuple(
        ClusterNodeSpec(node.name, node.gpus, node.gpu_type, node.domain, node.name in healthy)
        for node in cluster
    )


class Work:
    """Random work per node, with end times and protection around a moving ``now``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_id = 1

    def on(self, node: ClusterNodeSpec, now: float) -> list[RunningWorkload]:
        rng, here, left = self.rng, [], node.gpus
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            if rng.random() < 0.05:
                gpus = node.gpus  # overcommitted: a key does not settle it
            elif left <= 0:
                break
            else:
                gpus = rng.choice([left, rng.randint(1, left)])
            left -= gpus
            placement = {node.name: gpus}
            if rng.random() < 0.2:
                placement["elsewhere"] = 2  # only this node's part counts
            here.append(
                running(
                    self.next_id,
                    "org/a",
                    placement,
                    funded=rng.random() < 0.7,
                    expected_end=rng.choice([None, now + rng.choice([-HOUR, 0.0, 1.0, HOUR, 5 * HOUR])]),
                    protected_until=now + rng.choice([-HOUR, 0.0, HOUR, 2 * HOUR]),
                )
            )
            self.next_id += 1
        return here


def free_of(cluster, occupants) -> dict[str, int]:
    free = {}
    for node in cluster:
        if node.healthy:
            placed = sum(
                gpus
                for work in occupants.get(node.name, ())
                for name, gpus in work.placement
                if name == node.name
            )
            free[node.name] = max(0, node.gpus - placed)
    return free


def from_scratch(cluster, free, occupants, now, preemptive) -> ReleaseProfile:
    return ReleaseProfile([node for node in cluster if node.healthy], free, occupants, now, preemptive)


@pytest.mark.parametrize("logged", [True, False], ids=["logged-keys", "plain-keys"])
@pytest.mark.parametrize("preemptive", [True, False], ids=["drain", "declared-ends"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_carried_order_gives_what_a_profile_from_scratch_gives_pass_after_pass(preemptive, seed, logged):
    """``logged``: the filing's keys, which log the nodes they drop (the order looks only at
    those again); else a plain dict (the order looks at every node's key)."""
    rng, work = random.Random(seed), Work(seed)
    cluster, now = cluster_of(), NOW
    names = [node.name for node in cluster]
    base = {node.name: work.on(node, now) for node in cluster}
    keys: dict = ReleaseKeys() if logged else {}  # the filing's release keys: kept while a node's work stays
    orders: list = []  # the order of each pass (kept alive, so told apart by identity)
    session = PlanningSession()
    for step in range(60):
        for name in rng.sample(names, rng.randint(0, 3)):  # work started or ended since
            base[name] = work.on(next(node for node in cluster if node.name == name), now)
            if logged:
                keys.drop(name)
            else:
                keys.pop(name, None)
        if logged and step % 25 == 24:  # the log grew long: a new one
            keys.restart()
        if rng.random() < 0.1:  # a node fails or comes back: a new nodes tuple
            cluster = cluster_of({name for name in names if rng.random() < 0.9})
            keys.clear()
        occupants = dict(base)
        changed = set(rng.sample(names, rng.randint(0, 2)))  # changed by this pass before it asks
        for name in changed:
            occupants[name] = work.on(next(node for node in cluster if node.name == name), now)
        free = free_of(cluster, occupants)
        carried = ReleaseProfile(
            (node for node in cluster if node.healthy),
            free,
            occupants,
            now,
            preemptive,
            keys,
            changed,
            source=cluster,
            session=session,
        )
        fresh = from_scratch(cluster, free, occupants, now, preemptive)
        for shape in rng.sample(SHAPES, len(SHAPES)):
            assert carried.earliest(shape) == fresh.earliest(shape), shape
        if not any(order is session.release_order for order in orders):
            orders.append(session.release_order)
        # later in the pass: more work starts or leaves, and the profile is refreshed
        touched = rng.sample(names, rng.randint(1, 2))
        occupants = dict(occupants)
        for name in touched:
            occupants[name] = work.on(next(node for node in cluster if node.name == name), now)
        free = free_of(cluster, occupants)
        carried.refresh(touched, free, occupants)
        fresh = from_scratch(cluster, free, occupants, now, preemptive)
        for shape in SHAPES:
            assert carried.earliest(shape) == fresh.earliest(shape), shape
        now += rng.choice([0.0, 1.0, 10.0, 600.0, HOUR, 3 * HOUR])
    assert len(orders) < 20  # the order was carried, not made anew each pass


def test_new_keys_every_pass_give_what_a_profile_from_scratch_gives():
    """A live pass: new keys (and new objects) every pass; the order is made anew each time."""
    rng, work = random.Random(9), Work(9)
    cluster = cluster_of()
    for step in range(20):
        now = NOW + step * 600.0
        occupants = {node.name: work.on(node, now) for node in cluster}
        free = free_of(cluster, occupants)
        carried = ReleaseProfile(list(cluster), free, occupants, now, True, {}, (), source=tuple(cluster))
        fresh = from_scratch(cluster, free, occupants, now, True)
        for shape in rng.sample(SHAPES, len(SHAPES)):
            assert carried.earliest(shape) == fresh.earliest(shape), shape


def test_nodes_free_now_tie_at_now_and_go_by_name():
    """Work past its end or protection releases its node now, whenever that was: the earliest
    such nodes by name, not by how long ago."""
    cluster = nodes(4)
    occupants = {
        "n0": [running(1, "org/a", {"n0": 8}, expected_end=NOW - HOUR)],
        "n1": [running(2, "org/a", {"n1": 8}, expected_end=NOW + HOUR)],
        "n2": [running(3, "org/a", {"n2": 8}, expected_end=NOW - 2 * HOUR)],
        "n3": [running(4, "org/a", {"n3": 8}, expected_end=NOW - 3 * HOUR)],
    }
    free = dict.fromkeys(("n0", "n1", "n2", "n3"), 0)
    profile = ReleaseProfile(cluster, free, occupants, NOW, False, {}, (), source=cluster)
    assert profile.earliest((16, None, "H100")) == (NOW, ("n0", "n2"))
    assert profile.earliest((8, None, "H100")) == (NOW, ("n0",))
    assert profile.earliest((32, None, "H100")) == (NOW + HOUR, ("n0", "n1", "n2", "n3"))
