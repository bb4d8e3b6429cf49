"""Whether the running tuple lies in start order (``FilingCarry.in_start_order``), kept by the filing
carry from pass to pass as work is taken off and added at the end, is what listing the tuple's
start times afresh says; and the fair-share charge bisecting it by that charges what the whole
tuple charges."""

from __future__ import annotations

import math
import random

from scheduling.policy import PlanningSession, plan
from scheduling.policy.filing import FilingCarry
from scheduling.policy.ranking import FairTree
from tests.policy.builders import HOUR, NOW, nodes, running, tree

TREE = tree(("org", None, 100), ("org/a", "org", 50), ("org/b", "org", 50))
CLUSTER = tuple(nodes(4))


def file(carry: FilingCarry, run: tuple, now: float) -> None:
    """What a pass's ``_index`` does to the carry (the filing itself is not read here)."""
    healthy = [node for node in CLUSTER if node.healthy]
    carry.filed(run, CLUSTER, healthy, {node.name: node.gpus for node in healthy}, {}, {}, now)


def afresh(run: tuple) -> bool:
    starts = [workload.started_at for workload in run]
    return all(map(math.isfinite, starts)) and starts == sorted(starts)


def charged(run, now: float) -> tuple:
    fair = FairTree(TREE, {"org/a": 5.0, "org/b": 7.0}, {}, ("org/a", "org/b"))
    assert fair.subtree_usage  # made now: what follows charges at once, as given
    fair.charge_running(run, now, 3 * HOUR)
    return dict(fair.subtree_usage), dict(fair.user_usage), fair.user_log


def test_the_kept_start_order_is_the_start_order_listed_afresh():
    carry = FilingCarry()
    rng = random.Random(3)
    ids, now = iter(range(1, 10_000)), NOW
    run: tuple = ()
    kept_order = 0
    odd = (-math.inf, math.inf, math.nan)
    for step in range(300):
        kept = [workload for workload in run if rng.random() > 0.03]
        added = []
        for _ in range(rng.randrange(4)):
            if rng.random() < 0.05:  # out of order, or not finite
                started = rng.choice(odd) if rng.random() < 0.5 else now - rng.uniform(0, 5 * HOUR)
            else:
                started = now - rng.uniform(0, 60.0)
            added.append(running(next(ids), rng.choice(("org/a", "org/b")), {"n0": 1}, started_at=started))
        added.sort(key=lambda workload: (math.isnan(workload.started_at), workload.started_at))
        run = tuple(kept + added) if step % 50 else tuple(added)  # now and then: all new objects
        if step % 7 == 0 and len(run) > 2:  # now and then: back in order by dropping the odd ones
            run = tuple(w for w in run if math.isfinite(w.started_at))
            run = tuple(sorted(run, key=lambda workload: workload.started_at))
        file(carry, run, now)
        kept_order += carry.ordered is not None
        assert carry.in_start_order(run) is afresh(run), step
        assert carry.in_start_order(list(run)) is afresh(run), step
        if afresh(run):  # the bisected charge is the charge of the whole tuple, bit for bit
            whole = charged(iter(run), now)  # (not a tuple: charged workload by workload)
            assert repr(charged(run, now)) == repr(whole)
        now += rng.uniform(0, 600.0)
    assert kept_order > 200  # mostly kept, not listed afresh


def test_the_running_allocations_kept_by_the_carry_are_the_tuple_s_and_keep_its_filing_exact():
    """``FilingCarry.allocations`` (a pass's ``_rank``) works out the change since the last
    tuple ahead of ``FilingCarry.filed`` (its ``_index``), which files that change; asked for a
    tuple that is then not filed (or filed without asking), the carry still files exactly what
    filing afresh does."""
    from tests.policy.test_filing import CONFIGS, MiniEngine, afresh, summary

    session = PlanningSession()
    carry = session.filing
    engine, config, rng = MiniEngine(11), CONFIGS["fairshare"], random.Random(5)
    for step in range(40):
        state = engine.snapshot()
        run = state.running
        assert set(carry.allocations(run)) == {workload.allocation for workload in run}
        if step % 5 == 3:  # asked for a tuple that is never filed
            stray = run[: rng.randrange(len(run) + 1)] + run[:0]
            assert set(carry.allocations(stray)) == {workload.allocation for workload in stray}
        if step % 7 == 5:  # a list: not carried
            assert set(carry.allocations(list(run))) == {workload.allocation for workload in run}
        result = plan(state, engine.now, config, session=session)
        assert summary(result) == summary(afresh(state, engine.now, config)), step
        engine.apply(result)
        engine.advance()
