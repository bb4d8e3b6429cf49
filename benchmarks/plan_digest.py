"""The plan digest: one SHA-256 over everything the policy decides, to prove a refactor changed nothing.

``python -m benchmarks.plan_digest`` prints the digest (``--parts`` prints one per part as well).
It reads only the public API (``scheduling.policy``: ``plan``, ``Snapshot``, ...; the simulator's
``run_simulation`` and ``ai2_scenario``), so the same file runs unchanged against an older tree.

What it digests, each plan written out field by field in a canonical form (starts, preemptions,
reservations, every pending reason with its code, parameters, sentence, position and estimated
start, the fair-share ratios; not the timings):

- ``snapshots``: 128 seeded random snapshots (budget trees of 1 to 3 levels with funded and
  unfunded allocations and concurrency limits; 1 to 60 nodes of two GPU types and sizes in several
  domains, some unhealthy; running work with gangs, resumable and protected work, unfunded work,
  declared runtimes; pending work with gangs, typed requests, holds, runtimes, priorities), each
  planned under 4 configurations with every reason, with none and with the reasons of a few ids.
  Every snapshot's fair-share plan is made once more with a planning session carried along a
  chain of passes: every fourth snapshot is followed by two more passes over its own result (the
  started work running, the preempted work gone, the same objects kept), as a carrying caller
  (the simulator, a long-lived worker) meets all the time.
- ``simulated``: every plan the simulator makes over two days of a small Ai2-like lab under
  fairshare, priority and fifo as commit 7040c65 defined them (``SIMULATED_CONFIGS``), through
  its own planning path, recorded as each is made. (Before issue 17 this part digested the
  simulator's summary and tables; those grew new numbers that are not plans, and the owners'
  resubmission changes what is pending, so the part now reads the plans themselves, with
  resubmission off. The baseline below was recomputed at 7040c65 with this file.)

Baseline: ``BASELINE`` below, computed at commit 7040c65 (plain Python, from a worktree of it) with
one change applied: issue 21's plainer reason sentences (``scheduling/policy/reasons.py`` as that
issue left it), which change the ``snapshots`` part's wording and nothing else. 7040c65 as it was
gives ``snapshots`` 17d5bb67... and ``all`` aa3a7fbe... (with the ``simulated`` part of before
issue 17: ``all`` 4ed9ba5c...); the policy rewrite of issue 16 matched those
before the new sentences were merged. ``tests/policy/test_plan_digest.py`` checks the baseline.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from scheduling.policy import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingWorkload,
    Plan,
    PolicyConfig,
    RunningWorkload,
    Snapshot,
    plan,
)
from scheduling.simulator import engine, run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario

BASELINE = {
    "snapshots": "c5e93f46153840533bfee551e00d9e190e6a3c070fce5f3bb35d05f7a2ee684d",
    "simulated": "578344acd9cf0a232ab4f0b94512b59ae5f7b046ec01608a8dd232a5ef9e41a8",
    "all": "3b177dc9a3dddcc5881457bf60a8cc8a8e03d6b62f3f7b189d9dd96082a48eea",
}

NOW = 1_000_000.0
HOUR = 3600.0
CONFIGS = (
    PolicyConfig(),
    PolicyConfig(projected_charge_s=600.0, settle=False, backfill=False),
    PolicyConfig(ordering="priority", contract=False, reservation=False, backfill=False),
    PolicyConfig(ordering="fifo", contract=False, preemption=False, reservation=False, backfill=False),
)
SNAPSHOTS = 128
LAB = Ai2Parameters(days=2.0, seed=7, nodes=20, nodes_per_domain=5, teams=6, researchers=40, warmup_days=0.5)


def random_tree(rng: random.Random) -> tuple[BudgetNodeSpec, ...]:
    specs = [BudgetNodeSpec("org", None, 100.0)]
    for team in range(rng.randint(1, 5)):
        path = f"org/t{team}"
        limit = rng.choice([None, None, None, 8, 16])
        specs.append(BudgetNodeSpec(path, "org", rng.choice([0.0, 5.0, 10.0, 20.0, 40.0]), limit))
        for project in range(rng.randint(0, 3)):
            specs.append(BudgetNodeSpec(f"{path}/p{project}", path, rng.choice([0.0, 2.0, 5.0, 10.0])))
    return tuple(specs)


def random_nodes(rng: random.Random) -> tuple[ClusterNodeSpec, ...]:
    count = rng.choice([1, 2, 3, 5, 8, 12, 20, 60])
    return tuple(
        ClusterNodeSpec(
            f"n{i:02d}",
            rng.choice([4, 8, 8]),
            rng.choice(["H100", "H100", "A100"]),
            rng.choice(["x", "y", "z"]),
            healthy=rng.random() > 0.08,
        )
        for i in range(count)
    )


def _placements(rng: random.Random, nodes: tuple[ClusterNodeSpec, ...], gpus: int, free: dict[str, int]):
    """A placement of ``gpus`` on free GPUs (one node, or whole nodes of one type), or None."""
    healthy = [node for node in nodes if node.healthy]
    fitting = [node for node in healthy if free[node.name] >= gpus]
    if fitting:
        node = rng.choice(fitting)
        return ((node.name, gpus),)
    for size in (8, 4):
        whole = [node for node in healthy if node.gpus == size and free[node.name] == size]
        if gpus % size == 0 and len(whole) >= gpus // size:
            return tuple(sorted((node.name, size) for node in rng.sample(whole, gpus // size)))
    return None


def random_running(rng: random.Random, tree, nodes, funded: set[str]) -> list[RunningWorkload]:
    free = {node.name: node.gpus for node in nodes}
    allocations = [spec.path for spec in tree if spec.parent is not None] or ["org"]
    running = []
    for i in range(rng.randint(0, 3 * len(nodes) + 2)):
        gpus = rng.choice([1, 1, 2, 4, 8, 16])
        placement = _placements(rng, nodes, gpus, free)
        if placement is None:
            continue
        for name, placed in placement:
            free[name] -= placed
        allocation = rng.choice(allocations)
        started = NOW - rng.choice([0.0, 0.0, 60.0, 600.0, 2 * HOUR, 10 * HOUR, 50 * HOUR])
        is_funded = allocation in funded and rng.random() > 0.15
        min_runtime = rng.choice([0.0, HOUR, 4 * HOUR, 20 * HOUR])
        running.append(
            RunningWorkload(
                id=10_000 + i,
                allocation=allocation,
                user=rng.choice(["alice", "bob", "carol"]),
                gpus=gpus,
                placement=placement,
                started_at=started,
                protected_until=started + min_runtime if is_funded else started,
                resumable=rng.random() < 0.5,
                funded=is_funded,
                workload_class=rng.choice(["batch", "batch", "debug", "interactive"]),
                expected_end=rng.choice([None, started + 3 * HOUR, started + 30 * HOUR]),
                submitted_at=started - rng.choice([0.0, 60.0, 3600.0]),
                priority=rng.randint(0, 2),
            )
        )
    return running


def random_pending(rng: random.Random, tree, count: int) -> list[PendingWorkload]:
    allocations = [spec.path for spec in tree if spec.parent is not None] + ["org", "elsewhere"]
    pending = []
    for i in range(1, count + 1):
        gpus = rng.choice([1, 1, 1, 2, 3, 4, 8, 16, 32])
        held = rng.random() < 0.05
        pending.append(
            PendingWorkload(
                id=i,
                allocation=rng.choice(allocations),
                user=rng.choice(["alice", "bob", "carol", "dave"]),
                gpus=gpus,
                submitted_at=NOW - rng.randint(0, 5000),
                gpus_per_node=rng.choice([None, None, None, 2, 4, 8]),
                gpu_type=rng.choice([None, None, "H100", "A100"]),
                workload_class=rng.choice(["batch", "batch", "debug", "interactive"]),
                min_runtime_s=rng.choice([0.0, 0.0, HOUR, 10 * HOUR]),
                resumable=rng.random() < 0.5,
                max_runtime_s=rng.choice([None, 1800.0, 5 * HOUR, 40 * HOUR]),
                held=held,
                held_by="alice" if held else "",
                held_at=NOW - 100 if held else None,
                held_note="maintenance" if held else "",
                priority=rng.randint(0, 3),
            )
        )
    return pending


def random_snapshot(seed: int) -> Snapshot:
    rng = random.Random(f"plan-digest-{seed}")
    tree = random_tree(rng)
    nodes = random_nodes(rng)
    funded = _funded(tree)
    running = random_running(rng, tree, nodes, funded)
    pending = random_pending(rng, tree, rng.choice([0, 1, 3, 8, 20, 60, 150, 400]))
    allocations = {spec.path for spec in tree} | {w.allocation for w in pending}
    usage = {path: rng.choice([0.0, 1e3, 1e5, 1e6, 1e7]) for path in sorted(allocations)}
    user_usage = {
        (w.allocation, w.user): rng.choice([0.0, 1e3, 1e5])
        for w in [*running, *pending]
        if rng.random() < 0.5
    }
    backend = rng.random() > 0.03
    return Snapshot(
        "digest",
        tree,
        nodes,
        tuple(running),
        tuple(pending),
        usage,
        user_usage,
        backend_available=backend,
        backend_error_at=None if backend else NOW - 30,
    )


def _funded(tree: tuple[BudgetNodeSpec, ...]) -> set[str]:
    """Allocations with a budget of their own or under a funded ancestor (a guess for generating
    running work's ``funded`` flag: the policy decides funding itself)."""
    return {spec.path for spec in tree if spec.budget > 0 and spec.parent is not None}


def after(snapshot: Snapshot, result: Plan, now: float, rng: random.Random) -> Snapshot:
    """The next pass's snapshot: the plan applied, the running objects that stay kept as they are."""
    pending = {w.id: w for w in snapshot.pending}
    gone = {p.workload_id for p in result.preemptions}
    running = [w for w in snapshot.running if w.id not in gone]
    if running and rng.random() < 0.5:
        running.pop(rng.randrange(len(running)))  # one ended
    for start in result.starts:
        workload = pending.pop(start.workload_id, None)
        if workload is None:
            continue
        running.append(
            RunningWorkload(
                id=workload.id,
                allocation=workload.allocation,
                user=workload.user,
                gpus=workload.gpus,
                placement=start.placement,
                started_at=now,
                protected_until=start.protected_until,
                resumable=workload.resumable,
                funded=start.funded,
                workload_class=workload.workload_class,
                expected_end=None if workload.max_runtime_s is None else now + workload.max_runtime_s,
                submitted_at=workload.submitted_at,
                priority=workload.priority,
            )
        )
    return replace(snapshot, running=tuple(running), pending=tuple(pending.values()))


def canonical(result: Plan) -> str:
    """Every decision and reason of ``result``, field by field (not the timings)."""
    lines = [
        *(f"S {s.workload_id} {s.placement!r} {s.protected_until!r} {s.funded}" for s in result.starts),
        *(f"P {p.workload_id} {p.requeue} {p.preemptor_id} {p.reason!r}" for p in result.preemptions),
        *(f"R {r.workload_id} {r.nodes!r} {r.start_at!r}" for r in result.reservations),
    ]
    for reason in result.reasons:
        params = sorted((str(key), repr(value)) for key, value in reason.params.items())
        lines.append(
            f"W {reason.workload_id} {reason.code.value} {params!r} {reason.message!r} "
            f"{reason.position} {reason.estimated_start!r}"
        )
    lines.append(f"F {sorted(result.fair_share.items())!r}")
    return "\n".join(lines)


def snapshots_digest() -> str:
    digest = hashlib.sha256()
    for seed in range(SNAPSHOTS):
        snapshot = random_snapshot(seed)
        rng = random.Random(f"plan-digest-passes-{seed}")
        passes = 3 if seed % 4 == 0 else 1
        now = NOW
        carried = _session()
        for step in range(passes):
            ids = sorted(w.id for w in snapshot.pending)
            chosen = frozenset(rng.sample(ids, min(3, len(ids))))
            for number, config in enumerate(CONFIGS):
                for explain in (True, False, chosen):
                    result = plan(snapshot, now, config, explain=explain)
                    digest.update(f"#{seed}.{step}.{number}.{explain!r}\n".encode())
                    digest.update(canonical(result).encode())
            result = plan(snapshot, now, CONFIGS[0], **carried)
            digest.update(f"#{seed}.{step}.carried\n".encode())
            digest.update(canonical(result).encode())
            now += rng.choice([0.0, 10.0, 600.0])
            snapshot = after(snapshot, result, now, rng)
    return digest.hexdigest()


def _session() -> dict:
    """``plan``'s keyword for a planning session carried along a chain of passes; none before
    sessions existed (commit 7040c65 carried the same state implicitly, per thread)."""
    try:
        from scheduling.policy import PlanningSession
    except ImportError:
        return {}
    return {"session": PlanningSession()}


# The three worlds of the ``simulated`` part as commit 7040c65 defined them (its
# ``scheduling.simulator.POLICIES``): the presets may move on (issue 17 turned new rules on in
# "fairshare"), the digest keeps comparing like with like.
SIMULATED_CONFIGS = {
    "fairshare": PolicyConfig(ordering="fairshare"),
    "priority": PolicyConfig(ordering="priority", contract=False, reservation=False, backfill=False),
    "fifo": PolicyConfig(
        ordering="fifo", contract=False, preemption=False, reservation=False, backfill=False
    ),
}


@contextmanager
def _recording(digest: hashlib._Hash) -> Iterator[None]:
    """Every plan the simulator makes, written into ``digest`` as it is made (with its ``now``),
    through the simulator's own planning path (``engine.plan_grouped``: the pending queue
    grouped, a carried session where the tree has one)."""
    original = engine.plan_grouped

    def recorded(*args: Any, **kwargs: Any) -> Plan:
        result = original(*args, **kwargs)
        digest.update(f"@{args[1]!r}\n{canonical(result)}".encode())
        return result

    engine.plan_grouped = recorded
    try:
        yield
    finally:
        engine.plan_grouped = original


def _without_resubmission() -> dict:
    """``run_simulation``'s keyword that turns the owners' resubmission of ended work off (issue
    17), where the simulator has it: resubmission changes what is pending, not how plans are made."""
    if "resubmit_delay_s" in inspect.signature(run_simulation).parameters:
        return {"resubmit_delay_s": None}
    return {}


def simulated_digest() -> str:
    digest = hashlib.sha256()
    inputs = ai2_scenario(LAB)
    for name, config in SIMULATED_CONFIGS.items():
        digest.update(f"#{name}\n".encode())
        with _recording(digest):
            run_simulation(inputs, config=config, **_without_resubmission())
    return digest.hexdigest()


def digests() -> dict[str, str]:
    parts = {"snapshots": snapshots_digest(), "simulated": simulated_digest()}
    parts["all"] = hashlib.sha256((parts["snapshots"] + parts["simulated"]).encode()).hexdigest()
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", action="store_true", help="print each part's digest too")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the digest is the baseline")
    args = parser.parse_args(argv)
    parts = digests()
    if args.parts:
        for name, value in parts.items():
            print(f"{name:10} {value}")
    else:
        print(parts["all"])
    if args.check:
        return 0 if parts == BASELINE else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
