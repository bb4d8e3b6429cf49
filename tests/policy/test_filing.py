"""Running work filed once and carried from pass to pass (filing.py) plans exactly what filing it
afresh every pass plans: over a run of passes where work starts, ends and is preempted, nodes fail
and come back and the clock moves, with the same objects reused as the simulator reuses them, and
with new objects every pass as a live pass reads them."""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import replace

import pytest

from scheduling.policy import ClusterNodeSpec, PlanningSession, PolicyConfig, RunningWorkload, plan
from scheduling.policy.filing import FilingCarry
from scheduling.policy.planner import _Pass
from tests.policy.builders import HOUR, NOW, nodes, pending, running, snapshot, tree

TREE = tree(
    ("org", None, 100),
    ("org/a", "org", 50, 40),  # a concurrency limit: GPUs used are carried too
    ("org/b", "org", 30),
    ("org/c", "org", 20),
    ("free", None, 0),
)
ALLOCATIONS = ("org/a", "org/b", "org/c", "free")
CONFIGS = {
    "fairshare": PolicyConfig(),
    "priority": PolicyConfig(ordering="priority", contract=False),
    "fifo": PolicyConfig(ordering="fifo", contract=False),
}


@contextmanager
def counted(session: PlanningSession | None = None):
    """Counts the passes whose filing was carried over and those filed afresh (in ``session``
    only, when given)."""
    counts = {"carried": 0, "afresh": 0}
    original = FilingCarry.filed

    def counting(carry, *args):
        filed = original(carry, *args)
        if session is None or carry is session.filing:
            counts["carried" if filed is not None else "afresh"] += 1
        return filed

    FilingCarry.filed = counting
    try:
        yield counts
    finally:
        FilingCarry.filed = original


def afresh(state, now, config):
    """The plan of a pass without a session: truly cold, filed afresh."""
    return plan(state, now, config)


def summary(result) -> tuple:
    return (
        result.starts,
        result.preemptions,
        result.reservations,
        list(result.reasons),
        dict(result.fair_share),
    )


def filed(state, now, config, session: PlanningSession | None = None) -> tuple:
    """What ``_index`` hands the pass, compared structurally (free GPUs, buckets, nonempty whole
    node lists; dict orders aside, which the pass does not read), the candidates in the order a
    pass reads them. ``session``: carried in it (None: filed afresh)."""
    one = _Pass(state, now, config, None, False, session)
    one._rank()
    one._index()
    capacity = one.capacity
    for key, listed in capacity.candidates.items():
        one.preemptor.victims.in_order(key, listed)
    return (
        sorted(capacity.occupants.items()),
        sorted(capacity.candidates.items()),
        one.standing.used,
        capacity.index.free,
        capacity.index.buckets,
        sorted((key, names) for key, names in capacity.index.whole.items() if names),
        capacity.start_index.free,
    )


class MiniEngine:
    """Just enough of the simulator: it applies each plan and keeps the same objects running."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = NOW
        self.cluster = list(nodes(6, domain="d0", prefix="a") + nodes(6, domain="d1", prefix="b"))
        self.running: dict[int, RunningWorkload] = {}
        self.waiting: dict[int, object] = {}
        self.next_id = 1
        for _ in range(30):
            self.arrive()
        self.usage = {allocation: self.rng.uniform(0, 50 * HOUR) for allocation in ALLOCATIONS}

    def arrive(self) -> None:
        rng, workload_id = self.rng, self.next_id
        self.next_id += 1
        gpus = rng.choice([1, 1, 2, 4, 8, 8, 16])
        self.waiting[workload_id] = pending(
            workload_id,
            rng.choice(ALLOCATIONS),
            gpus,
            user=rng.choice(["ann", "bob", "cy"]),
            submitted_at=self.now - rng.uniform(0, HOUR),
            resumable=rng.random() < 0.5,
            min_runtime_s=rng.choice([0.0, 0.0, 600.0, HOUR]),
            max_runtime_s=rng.choice([None, 2 * HOUR, 10 * HOUR]),
            priority=rng.choice([1, 2, 3]),
        )

    def snapshot(self):
        return snapshot(
            TREE,
            tuple(self.cluster),
            run=self.running.values(),
            queue=self.waiting.values(),
            usage=self.usage,
        )

    def apply(self, result) -> None:
        for preemption in result.preemptions:
            victim = self.running.pop(preemption.workload_id)
            if preemption.requeue:
                self.waiting[victim.id] = pending(
                    victim.id, victim.allocation, victim.gpus, user=victim.user, resumable=True
                )
        for start in result.starts:
            workload = self.waiting.pop(start.workload_id)
            self.running[workload.id] = RunningWorkload(
                id=workload.id,
                allocation=workload.allocation,
                user=workload.user,
                gpus=workload.gpus,
                placement=start.placement,
                started_at=self.now,
                protected_until=start.protected_until,
                resumable=workload.resumable,
                funded=start.funded,
                expected_end=None if workload.max_runtime_s is None else self.now + workload.max_runtime_s,
                priority=workload.priority,
            )

    def advance(self) -> None:
        rng = self.rng
        self.now += rng.choice([10.0, 10.0, 60.0, 600.0, 3 * HOUR])
        for workload in list(self.running.values()):
            if rng.random() < 0.08:
                del self.running[workload.id]
        for _ in range(rng.randint(0, 3)):
            self.arrive()
        if rng.random() < 0.15:  # a node fails or comes back (work on it may stay, as reported)
            at = rng.randrange(len(self.cluster))
            node = self.cluster[at]
            self.cluster[at] = ClusterNodeSpec(
                node.name, node.gpus, node.gpu_type, node.domain, not node.healthy
            )


@pytest.mark.parametrize("ordering", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_carried_filing_plans_exactly_what_filing_afresh_plans_pass_after_pass(ordering, seed):
    config, engine, session = CONFIGS[ordering], MiniEngine(seed), PlanningSession()
    preempted = 0
    with counted(session) as counts:
        for _ in range(60):
            state = engine.snapshot()
            expected = afresh(state, engine.now, config)
            assert filed(state, engine.now, config, session) == filed(state, engine.now, config)
            result = plan(state, engine.now, config, session=session)
            assert summary(result) == summary(expected)
            preempted += len(result.preemptions)
            engine.apply(result)
            engine.advance()
    assert counts["carried"] > counts["afresh"]
    if ordering != "fifo":
        assert preempted  # the run exercised evictions from copies of the carried candidates


def replayed(engine: MiniEngine, config: PolicyConfig, passes: int, reread) -> dict[str, int]:
    """Plan ``passes`` passes of ``engine``, each from ``reread(snapshot)``, checking every plan
    against the snapshot filed afresh; the counts of carried and afresh filings."""
    session = PlanningSession()
    with counted(session) as counts:
        for _ in range(passes):
            state = engine.snapshot()
            result = plan(reread(state), engine.now, config, session=session)
            assert summary(result) == summary(afresh(state, engine.now, config))
            engine.apply(result)
            engine.advance()
    return counts


def test_a_live_pass_reads_new_objects_every_time_and_files_them_afresh():
    def new_objects(state):
        return replace(state, running=tuple(replace(workload) for workload in state.running))

    counts = replayed(MiniEngine(4), CONFIGS["fairshare"], 20, new_objects)
    assert counts["carried"] == 0


def test_work_lost_is_ranked_at_each_pass_s_now_even_as_the_order_flips():
    """Not resumable: 8 GPUs for an hour lose less than 1 GPU for ten hours, until ~17 minutes on."""
    cluster = nodes(2)
    old = running(1, "org/b", {"n0": 1}, started_at=NOW - 10 * HOUR, resumable=False)
    new = running(2, "org/b", {"n1": 8}, started_at=NOW - HOUR, resumable=False)
    kept = running(3, "org/b", {"n0": 2}, started_at=NOW - HOUR, resumable=True)
    run = (old, new, kept)
    config, session = CONFIGS["fairshare"], PlanningSession()
    orders = []
    for now in (NOW, NOW + HOUR / 4, NOW + HOUR):
        state = snapshot(TREE, cluster, run=run)
        assert filed(state, now, config, session) == filed(state, now, config)
        orders.append([w.id for w in dict(filed(state, now, config, session)[1])[("org/b", True)]])
    assert orders == [[3, 2, 1], [3, 2, 1], [3, 1, 2]]  # resumable first: it loses nothing


def test_work_started_at_now_becomes_a_candidate_at_a_later_pass_and_the_clock_may_go_back():
    cluster = nodes(3)
    first = running(1, "org/b", {"n0": 8}, started_at=NOW - HOUR)
    just = running(2, "org/c", {"n1": 4}, started_at=NOW, resumable=False)
    config, session = CONFIGS["fairshare"], PlanningSession()
    state = snapshot(TREE, cluster, run=(first, just), queue=(pending(9, "org/a", 16),))
    with counted(session) as counts:
        for now in (NOW, NOW, NOW + 10, NOW + 20, NOW - 5, NOW + 30):
            assert filed(state, now, config, session) == filed(state, now, config)
            assert summary(plan(state, now, config, session=session)) == summary(afresh(state, now, config))
    assert counts["carried"]


def test_counts_it_cannot_sum_exactly_are_filed_afresh():
    cluster = nodes(2)
    odd = running(1, "org/b", {"n0": 2}, started_at=NOW - HOUR)
    idle = replace(running(2, "org/b", {"n1": 1}, started_at=NOW - HOUR, resumable=False), gpus=0)
    config, session = CONFIGS["fairshare"], PlanningSession()
    for run in ((odd,), (odd, idle), (odd, idle)):
        state = snapshot(TREE, cluster, run=run)
        assert filed(state, NOW, config, session) == filed(state, NOW, config)


def test_a_new_session_carries_nothing_and_a_pass_without_one_touches_none():
    state = snapshot(TREE, nodes(1), run=(running(1, "org/b", {"n0": 8}),))
    session = PlanningSession()
    with counted() as counts:
        plan(state, NOW, CONFIGS["fairshare"], session=session)
        plan(state, NOW, CONFIGS["fairshare"], session=PlanningSession())
        plan(state, NOW, CONFIGS["fairshare"])
        assert counts == {"carried": 0, "afresh": 3}
        plan(state, NOW, CONFIGS["fairshare"], session=session)
    assert counts == {"carried": 1, "afresh": 3}


def test_the_same_objects_in_another_order_or_twice_are_filed_as_afresh():
    """Reordered: what moved is taken off and filed again where it now is; twice: afresh."""
    engine, config, session = MiniEngine(5), CONFIGS["fairshare"], PlanningSession()
    for _ in range(8):  # some work running
        state = engine.snapshot()
        engine.apply(plan(state, engine.now, config, session=session))
        engine.advance()
    run = list(engine.running.values())
    assert len(run) > 4
    rng = random.Random(7)
    with counted(session) as counts:
        for step in range(12):
            if step % 3 == 0:
                rng.shuffle(run)
            else:  # one moves to the end, one to the front
                run.append(run.pop(rng.randrange(len(run))))
                run.insert(0, run.pop(rng.randrange(len(run))))
            twice = run + run[:1] if step == 7 else run
            state = replace(engine.snapshot(), running=tuple(twice))
            assert filed(state, engine.now, config, session) == filed(state, engine.now, config)
            assert summary(plan(state, engine.now, config, session=session)) == summary(
                afresh(state, engine.now, config)
            )
            engine.now += 10.0
    assert counts["carried"]


def test_a_budget_tree_read_anew_every_pass_is_not_carried():
    def new_tree(state):
        return replace(state, tree=tuple(replace(spec) for spec in TREE))

    counts = replayed(MiniEngine(6), CONFIGS["fairshare"], 10, new_tree)
    assert counts["carried"] == 0


def test_a_reservation_sees_at_once_that_the_work_on_a_node_left_since_the_pass_before():
    """When each node is wholly free is kept from pass to pass (reservation.py); once its work
    ends, the waiting gang's reservation counts that node as free now, not when the work would
    have released it."""
    session = PlanningSession()
    cluster = nodes(3)  # n0, n1, n2: 8 GPUs each, one domain
    held = [
        running(
            i, "org/b", {f"n{i}": 8}, protected_until=NOW + (5 + i) * HOUR, expected_end=NOW + (5 + i) * HOUR
        )
        for i in range(3)
    ]
    gang = pending(10, "org/a", 16)
    config = CONFIGS["fairshare"]
    for work in (held, held, [held[0], held[2]]):  # the last pass: n1's work has ended
        state = snapshot(TREE, cluster, run=work, queue=[gang])
        result = plan(state, NOW, config, session=session)
        assert summary(result) == summary(afresh(state, NOW, config))
    (reservation,) = result.reservations
    assert (reservation.nodes, reservation.start_at) == (("n0", "n1"), NOW + 5 * HOUR)
