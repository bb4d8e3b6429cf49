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

from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario

MONTH = Ai2Parameters(days=30.0, seed=1)
TENFOLD = replace(MONTH, days=10.0, nodes=1250, teams=150, researchers=1500)
MONTH_TARGET_S = 15.0


def measure(parameters: Ai2Parameters, repeat: int, policy: str) -> dict[str, object]:
    inputs = ai2_scenario(parameters)
    walls, summary = [], {}
    for _ in range(repeat):
        began = time.perf_counter()
        summary = run_simulation(inputs, policy=policy).summary
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
        "wall_s": round(statistics.median(walls), 2),
        "wall_s_runs": [round(wall, 2) for wall in walls],
        "delivered_owed_ratio": summary["delivered_owed_ratio"],
        "occupancy": summary["occupancy"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the default prints it too)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the median is reported")
    parser.add_argument("--policy", default="fairshare", help="fairshare, priority or fifo")
    parser.add_argument("--skip-tenfold", action="store_true", help="only the 1,000-GPU month")
    options = parser.parse_args(argv)
    month = measure(MONTH, options.repeat, options.policy)
    result: dict[str, object] = {"month_1000": month, "month_target_s": MONTH_TARGET_S}
    result["month_within_target"] = month["wall_s"] <= MONTH_TARGET_S
    if not options.skip_tenfold:
        tenfold = measure(TENFOLD, options.repeat, options.policy)
        result["tenfold_10000"] = tenfold
        result["tenfold_over_month"] = round(float(tenfold["wall_s"]) / max(float(month["wall_s"]), 1e-9), 2)
        result["tenfold_within_target"] = result["tenfold_over_month"] <= 10.0
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
