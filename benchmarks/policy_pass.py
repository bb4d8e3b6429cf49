"""How long one scheduling pass takes on a realistic random snapshot.

    python -m benchmarks.policy_pass --pending 50000 --nodes 2000 --json

The snapshot: an org with 3 programs and 15 teams (a 3-level budget tree, one team unfunded), 300
users, nodes of 8 GPUs (80% H100, 20% A100) in domains of 32 nodes, running work filling about 90%
of the GPUs, pending work of 1-64 GPUs. The same seed gives the same snapshot. Prints one JSON
object (or a readable summary) with p50/p95 wall time (and CPU time, which other processes on a
shared machine disturb less) over ``--repeat`` passes.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import replace

from scheduling.policy import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingWorkload,
    PlanningSession,
    PolicyConfig,
    RunningWorkload,
    Snapshot,
    plan,
)
from scheduling.policy.placement import FreeIndex
from scheduling.policy.replay import after_plan

SIZES = (1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 32, 64)
NOW = 1_800_000_000.0
HOUR = 3600.0


def build_tree(rng: random.Random) -> tuple[tuple[BudgetNodeSpec, ...], list[str]]:
    tree = [BudgetNodeSpec("org", None, 1000.0)]
    teams = []
    for program in range(3):
        program_path = f"org/program-{program}"
        tree.append(BudgetNodeSpec(program_path, "org", rng.choice((200.0, 300.0, 500.0))))
        for team in range(5):
            path = f"{program_path}/team-{team}"
            budget = 0.0 if (program, team) == (2, 4) else float(rng.randint(10, 100))
            tree.append(BudgetNodeSpec(path, program_path, budget))
            teams.append(path)
    return tuple(tree), teams


def build_nodes(count: int) -> tuple[ClusterNodeSpec, ...]:
    nodes = []
    for i in range(count):
        gpu_type = "A100" if i % 5 == 4 else "H100"
        nodes.append(ClusterNodeSpec(f"node-{i:05d}", 8, gpu_type, domain=f"{gpu_type}-d{i // 32:03d}"))
    return tuple(nodes)


def build_running(rng: random.Random, nodes, teams, users, busy: float) -> list[RunningWorkload]:
    index = FreeIndex(nodes)
    total = sum(node.gpus for node in nodes)
    running, used, next_id = [], 0, 10_000_000
    while used < busy * total:
        gpus = rng.choice(SIZES)
        placement = index.place((gpus, None, None))
        if placement is None:
            if gpus == 1:
                break
            continue
        index.take(placement)
        team = rng.choice(teams)
        started = NOW - rng.uniform(0, 24 * HOUR)
        min_runtime = rng.choice((0.0, HOUR, 4 * HOUR, 8 * HOUR))
        funded = not team.endswith("program-2/team-4")
        running.append(
            RunningWorkload(
                id=next_id,
                allocation=team,
                user=rng.choice(users[team]),
                gpus=gpus,
                placement=placement,
                started_at=started,
                protected_until=started + min_runtime if funded else started,
                resumable=rng.random() < 0.6,
                funded=funded,
                expected_end=started + rng.choice((2, 12, 48)) * HOUR if rng.random() < 0.5 else None,
                submitted_at=started - rng.uniform(0, HOUR),
            )
        )
        used += gpus
        next_id += 1
    return running


def build_pending(rng: random.Random, count: int, teams, users) -> list[PendingWorkload]:
    pending = []
    for i in range(count):
        team = rng.choice(teams)
        pending.append(
            PendingWorkload(
                id=i + 1,
                allocation=team,
                user=rng.choice(users[team]),
                gpus=rng.choice(SIZES),
                submitted_at=NOW - rng.uniform(0, 48 * HOUR),
                gpu_type=rng.choice((None, None, None, "H100", "A100")),
                workload_class=rng.choice(("batch", "batch", "batch", "interactive", "debug")),
                min_runtime_s=rng.choice((0.0, HOUR, 4 * HOUR)),
                resumable=rng.random() < 0.6,
                max_runtime_s=rng.choice((None, 2 * HOUR, 12 * HOUR)),
                held=rng.random() < 0.01,
            )
        )
    pending.sort(key=lambda w: (w.submitted_at, w.id))  # as the live pass reads it from the database
    return pending


def build_snapshot(pending: int, nodes: int, seed: int, busy: float = 0.9) -> Snapshot:
    rng = random.Random(seed)
    tree, teams = build_tree(rng)
    users = {team: [f"user-{t * 20 + u:03d}" for u in range(20)] for t, team in enumerate(teams)}
    cluster_nodes = build_nodes(nodes)
    _progress(f"building {nodes} nodes, running work to {busy:.0%} busy")
    running = build_running(rng, cluster_nodes, teams, users, busy)
    _progress(f"{len(running)} running; building {pending} pending")
    queued = build_pending(rng, pending, teams, users)
    usage = {team: rng.uniform(0, 7 * 24 * HOUR * 50) for team in teams}
    user_usage = {(team, user): usage[team] * rng.random() / 10 for team in teams for user in users[team]}
    return Snapshot("bench", tree, cluster_nodes, tuple(running), tuple(queued), usage, user_usage)


def measure(cold: Snapshot, repeat: int, churn: float = 0.02, seed: int = 7, settle: bool = True) -> dict:
    """Time a first pass on the random snapshot (which rebalances it: the "cold" numbers), then
    ``repeat`` passes on the snapshot that first plan leaves with a ``churn`` fraction of the running
    work finished meanwhile (the steady state a live cluster is in from one pass to the next, with
    GPUs to hand out: the headline p50/p95)."""
    config = PolicyConfig(settle=settle)
    session = PlanningSession()  # a long-lived worker's: the steady passes carry what the cold one filed
    started = time.perf_counter()
    first = plan(cold, NOW, config, session=session)
    cold_ms = (time.perf_counter() - started) * 1000.0
    _progress(
        f"cold pass: {cold_ms:.1f} ms, {len(first.starts)} starts, {len(first.preemptions)} preemptions"
    )
    settled = after_plan(cold, first, NOW)
    rng = random.Random(seed)
    still_running = tuple(workload for workload in settled.running if rng.random() >= churn)
    snapshot = replace(settled, running=still_running)
    durations, cpu, read, result = [], [], [], None
    for attempt in range(repeat):
        result = None  # the previous plan is freed here, not inside the next pass's time
        started, started_cpu = time.perf_counter(), time.process_time()
        result = plan(snapshot, NOW, config, session=session)
        durations.append((time.perf_counter() - started) * 1000.0)
        cpu.append((time.process_time() - started_cpu) * 1000.0)
        started = time.perf_counter()
        result.reasons.made()  # what a caller that reads every reason object pays on top
        read.append((time.perf_counter() - started) * 1000.0)
        _progress(
            f"pass {attempt + 1}/{repeat}: {durations[-1]:.1f} ms wall, {cpu[-1]:.1f} ms cpu,"
            f" then {read[-1]:.1f} ms to make all {len(result.reasons)} reason objects"
        )
    with_reasons = sorted(map(sum, zip(durations, read, strict=True)))
    durations.sort()
    cpu.sort()
    return {
        "pending": len(snapshot.pending),
        "nodes": len(snapshot.nodes),
        "gpus": sum(node.gpus for node in snapshot.nodes),
        "running": len(snapshot.running),
        "repeat": repeat,
        "p50_ms": round(statistics.median(durations), 2),
        "p95_ms": round(_p95(durations), 2),
        "cpu_p50_ms": round(statistics.median(cpu), 2),
        "cpu_p95_ms": round(_p95(cpu), 2),
        "reasons": len(result.reasons),
        "reasons_read_ms_p50": round(statistics.median(read), 2),
        "with_reasons_read_p95_ms": round(_p95(with_reasons), 2),
        "starts": len(result.starts),
        "preemptions": len(result.preemptions),
        "reserved": len(result.reservations),
        "phases_ms": dict(result.timings_ms),
        "churn": churn,
        "settle": settle,
        "cold_ms": round(cold_ms, 2),
        "cold_starts": len(first.starts),
        "cold_preemptions": len(first.preemptions),
    }


def _p95(sorted_values: list[float]) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(0.95 * (len(sorted_values) - 1)))]


def _progress(message: str) -> None:
    print(f"[policy_pass] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--churn", type=float, default=0.02, help="share of running work ended between passes"
    )
    parser.add_argument("--no-settle", action="store_true", help="one walk only (PolicyConfig.settle=False)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    snapshot = build_snapshot(args.pending, args.nodes, args.seed)
    result = measure(snapshot, args.repeat, args.churn, args.seed, settle=not args.no_settle)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>12}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
