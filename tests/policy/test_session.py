"""A planning session changes how fast a pass is, never what it decides; without one, ``plan()``
is a pure function of its arguments."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from dataclasses import replace

import pytest

from benchmarks.plan_digest import CONFIGS, LAB, after, canonical, random_snapshot
from scheduling.policy import PlanningSession, plan
from scheduling.simulator import engine as engine_module
from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import ai2_scenario

NOW = 1_000_000.0
SEEDS = range(0, 48, 3)


def sessionless_digests(seeds) -> list[str]:  # noqa: ANN001 - an iterable of ints
    """The SHA-256 of each seed's snapshot planned without a session, under every config."""
    return [
        hashlib.sha256(
            "".join(canonical(plan(random_snapshot(seed), NOW, config)) for config in CONFIGS).encode()
        ).hexdigest()
        for seed in seeds
    ]


FRESH_PROCESS = """
import json, sys
from tests.policy.test_session import sessionless_digests
json.dump(sessionless_digests(json.loads(sys.argv[1])), sys.stdout)
"""


def test_a_pass_without_a_session_plans_what_it_plans_in_a_fresh_process():
    """Interleaved in one process with carried passes (sessions that saw other snapshots, and
    passes over each snapshot's results), every pass without a session gives the plan a fresh
    process gives: nothing one pass leaves behind reaches another."""
    rng, carried, here = random.Random(5), PlanningSession(), []
    for seed in SEEDS:
        snapshot = random_snapshot(seed)
        for _ in range(2):  # the session carries this snapshot's running work, then its result's
            result = plan(snapshot, NOW, CONFIGS[0], session=carried)
            snapshot = after(snapshot, result, NOW + 10.0, rng)
        plan(snapshot, NOW + 10.0, CONFIGS[1], session=PlanningSession())
        here.extend(sessionless_digests([seed]))
        plan(random_snapshot(seed), NOW, CONFIGS[2], session=carried)
    fresh = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, json.dumps(list(SEEDS))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(fresh.stdout) == here


@pytest.mark.parametrize("policy", ["fairshare", "priority", "fifo"])
def test_every_carried_pass_of_a_simulation_plans_what_a_cold_pass_plans(policy, monkeypatch):
    """The simulator carries one session over every pass (the same running objects, nodes and
    tree from pass to pass); each of its plans is checked against ``plan()`` without a session,
    truly cold (nothing filed, ranked, counted or ordered before), with every reason."""
    carried_plan = engine_module.plan_grouped
    checked = {"passes": 0, "decisions": 0}

    def checked_plan(snapshot, now, config, grouped, *, session, explain):  # noqa: ANN001
        result = carried_plan(snapshot, now, config, grouped, session=session, explain=explain)
        with_reasons = carried_plan(snapshot, now, config, grouped, session=session)
        cold = plan(snapshot, now, config)
        assert canonical(with_reasons) == canonical(cold)
        assert (result.starts, result.preemptions, result.reservations) == (
            cold.starts,
            cold.preemptions,
            cold.reservations,
        )
        checked["passes"] += 1
        checked["decisions"] += len(cold.starts) + len(cold.preemptions) + len(cold.reservations)
        return result

    monkeypatch.setattr(engine_module, "plan_grouped", checked_plan)
    run_simulation(ai2_scenario(replace(LAB, days=0.5)), policy=policy)
    assert checked["passes"] > 100 and checked["decisions"] > 100, checked
