"""Benchmark the simulator: the Ai2 month, and a ten times larger cluster for ten days.

``python -m benchmarks.simulate --json`` prints one JSON object:

- ``month_1000``: ``--scenario ai2 --days 30 --seed 1`` under fair share (all phases on: fair share,
  contract, gang placement, reservation and backfill). Target: ``wall_s`` <= 15.
- ``tenfold_10000``: 10 days of 10,000 GPUs (1,250 nodes), 150 teams, 1,500 researchers, so ten
  times the jobs per day. Target: ``wall_s`` <= 10 x the month's.

Wall times are medians of ``--repeat`` runs (the machine is shared; one run is noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace

from scheduling.policy import PolicyConfig
from scheduling.simulator import policy_config, run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario

MONTH = Ai2Parameters(days=30.0, seed=1)
TENFOLD = replace(MONTH, days=10.0, nodes=1250, teams=150, researchers=1500)
MONTH_TARGET_S = 15.0
CLASSIC = "fairshare-7040c65"


class _OutOfTime(Exception):
    pass


def measure(
    parameters: Ai2Parameters, repeat: int, policy: str, limit_s: float | None = None
) -> dict[str, object]:
    """Median wall time of ``repeat`` runs; a run past ``limit_s`` stops and is extrapolated."""
    inputs = ai2_scenario(parameters)
    walls, summary, reached = [], {}, 1.0
    for _ in range(repeat):
        began = time.perf_counter()
        progress = _deadline(began, limit_s) if limit_s else None
        try:
            summary = run_simulation(inputs, policy=policy, config=_config(policy), progress=progress).summary
        except _OutOfTime as stopped:
            reached = float(stopped.args[0])
            return _partial(parameters, inputs, policy, time.perf_counter() - began, reached)
        walls.append(time.perf_counter() - began)
    return {
        "policy": policy,
        "days": parameters.days,
        "warmup_days": parameters.warmup_days,
        "gpus": summary["gpus"],
        "jobs": len(inputs.jobs),
        "passes": summary["passes"],
        "plan_ms_p50": summary["plan_ms_p50"],
        "plan_ms_p95": summary["plan_ms_p95"],
        "plan_s_total": summary["plan_s_total"],
        "wall_s": round(statistics.median(walls), 2),
        "wall_s_runs": [round(wall, 2) for wall in walls],
        "completed": True,
        "delivered_owed_ratio": summary["delivered_owed_ratio"],
        "occupancy": summary["occupancy"],
    }


def _config(policy: str) -> PolicyConfig:
    """The named policy's configuration; ``fairshare-7040c65``: fair share as it was before issue
    17's rules (a bare ``PolicyConfig``)."""
    return PolicyConfig() if policy == CLASSIC else policy_config(policy)


def _deadline(began: float, limit_s: float):
    def progress(fraction: float) -> None:
        if time.perf_counter() - began > limit_s and fraction > 0:
            raise _OutOfTime(fraction)

    return progress


def _partial(
    parameters: Ai2Parameters, inputs, policy: str, wall: float, reached: float
) -> dict[str, object]:
    """A run stopped at ``reached`` of its simulated time: wall time extrapolated linearly (a lower
    bound when passes get slower as the queue grows)."""
    return {
        "policy": policy,
        "days": parameters.days,
        "warmup_days": parameters.warmup_days,
        "gpus": sum(node.gpus for node in inputs.cluster_nodes),
        "jobs": len(inputs.jobs),
        "completed": False,
        "simulated_fraction": round(reached, 4),
        "wall_s_until_stopped": round(wall, 2),
        "wall_s": round(wall / reached, 1),
        "wall_s_is_extrapolated": True,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the default prints it too)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the median is reported")
    parser.add_argument(
        "--policy",
        default="fairshare",
        help="fairshare, priority, fifo, easy or slurm; or fairshare-7040c65: fair share without issue 17's"
        " rules (as commit 7040c65 planned it), to compare speed like for like with an older tree",
    )
    parser.add_argument("--skip-tenfold", action="store_true", help="only the 1,000-GPU month")
    parser.add_argument(
        "--limit-s", type=float, default=None, help="stop a run after this long and extrapolate"
    )
    options = parser.parse_args(argv)
    month = measure(MONTH, options.repeat, options.policy, options.limit_s)
    result: dict[str, object] = {"month_1000": month, "month_target_s": MONTH_TARGET_S}
    result["month_within_target"] = month["wall_s"] <= MONTH_TARGET_S
    if not options.skip_tenfold:
        tenfold = measure(TENFOLD, options.repeat, options.policy, options.limit_s)
        result["tenfold_10000"] = tenfold
        result["tenfold_over_month"] = round(float(tenfold["wall_s"]) / max(float(month["wall_s"]), 1e-9), 2)
        result["tenfold_within_target"] = result["tenfold_over_month"] <= 10.0
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
