"""How faithful is the simulator? Replay logs with each job's recorded wait and compare.

``python -m benchmarks.fidelity --json`` (or ``--markdown``) replays every trace in
``../shared/traces/fidelity/`` (``--traces DIR``; read its README: the first 30 days of the KTH-SP2
and SDSC-SP2 logs, not compressed, on the machines as they were, each job with the wait it really
had, ``recorded_wait_s``) under ``easy`` (``--policy``, a comma list: KTH's machine ran EASY
backfill) and sets the simulated waits beside the recorded ones:

- ``all`` and ``wide`` (jobs of ``WIDE_GPUS``+ GPUs): mean, median and p90 of each, and their ratio
  (simulated / recorded);
- per job: Spearman's rank correlation of the two waits (ties get their average rank) and the
  share of jobs whose waits agree within a factor of 2 (``within_factor``: each wait is first
  raised to ``FLOOR_S``, so two waits both under a minute agree and a zero wait never divides).

Every job is replayed until it starts: the measured period runs ``DRAIN_DAYS`` past the last
submit, and ``never_started`` counts the jobs that still did not (their wait so far is used).
The trace reader reads the columns it knows; ``recorded_wait_s`` and ``id`` are read here, and
jobs are matched by ``id`` (the reader keeps it as the job's ``ref``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from scheduling.simulator import policy_config
from scheduling.simulator.engine import Engine
from scheduling.simulator.metrics import percentile
from scheduling.simulator.traces import TraceFormat, cluster_nodes, read_trace, trace_input

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "fidelity"
WIDE_GPUS = 32
FLOOR_S = 60.0  # waits under this count as this much before comparing (a pass is 10 s)
FACTOR = 2.0
DRAIN_DAYS = 60.0
PASS_INTERVAL_S = 10.0


# -- the statistics -------------------------------------------------------------------------------


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of ``values`` in ascending order; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    at = 0
    while at < len(order):
        end = at
        while end + 1 < len(order) and values[order[end + 1]] == values[order[at]]:
            end += 1
        shared = (at + end) / 2 + 1
        for position in range(at, end + 1):
            ranks[order[position]] = shared
        at = end + 1
    return ranks


def spearman(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rank correlation: Pearson's correlation of the average ranks (so ties are
    handled). None for fewer than two pairs or when either side is constant."""
    if len(first) != len(second):
        raise ValueError("spearman needs two sequences of the same length")
    if len(first) < 2:
        return None
    a, b = average_ranks(first), average_ranks(second)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    var_a = sum((x - mean_a) ** 2 for x in a)
    var_b = sum((y - mean_b) ** 2 for y in b)
    if var_a == 0 or var_b == 0:
        return None
    return cov / math.sqrt(var_a * var_b)


def agrees(simulated: float, recorded: float, factor: float = FACTOR, floor_s: float = FLOOR_S) -> bool:
    """Do two waits agree within ``factor``? Each is first raised to ``floor_s`` (both under it:
    they agree; a zero wait is compared as ``floor_s``), then the larger may be at most ``factor``
    times the smaller."""
    low, high = sorted((max(simulated, floor_s), max(recorded, floor_s)))
    return high <= factor * low


def within_factor(
    simulated: Sequence[float], recorded: Sequence[float], factor: float = FACTOR, floor_s: float = FLOOR_S
) -> float | None:
    """The share of jobs whose simulated and recorded waits ``agree``; None for no jobs."""
    if len(simulated) != len(recorded):
        raise ValueError("within_factor needs two sequences of the same length")
    if not simulated:
        return None
    hits = sum(agrees(s, r, factor, floor_s) for s, r in zip(simulated, recorded, strict=True))
    return hits / len(simulated)


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, median and p90 (seconds, rounded to 1 s); None for no values."""
    if not values:
        return {"mean_s": None, "median_s": None, "p90_s": None}
    return {
        "mean_s": round(sum(values) / len(values)),
        "median_s": round(percentile(values, 0.5) or 0.0),
        "p90_s": round(percentile(values, 0.9) or 0.0),
    }


def compare(simulated: Sequence[float], recorded: Sequence[float]) -> dict[str, object]:
    """Simulated against recorded waits of the same jobs (in the same order)."""
    sim, rec = summary(simulated), summary(recorded)
    ratios = {
        key.replace("_s", "_ratio"): _ratio(sim[key], rec[key]) for key in ("mean_s", "median_s", "p90_s")
    }
    rho = spearman(simulated, recorded)
    share = within_factor(simulated, recorded)
    return {
        "jobs": len(simulated),
        "simulated": sim,
        "recorded": rec,
        "simulated_over_recorded": ratios,
        "spearman": None if rho is None else round(rho, 3),
        "within_2x": None if share is None else round(share, 3),
    }


def _ratio(simulated: float | None, recorded: float | None) -> float | None:
    """simulated / recorded, rounded; None when either is unknown or the recorded one is 0."""
    if simulated is None or not recorded:
        return None
    return round(simulated / recorded, 3)


# -- the replay -----------------------------------------------------------------------------------


def recorded_waits(path: Path) -> dict[str, float]:
    """``id`` -> ``recorded_wait_s`` of every row."""
    with open(path, newline="", encoding="utf-8") as handle:
        return {row["id"]: float(row["recorded_wait_s"]) for row in csv.DictReader(handle)}


def replay(path: Path, policy: str, pass_interval_s: float = PASS_INTERVAL_S) -> dict[str, object]:
    """Replay one fidelity trace under ``policy``; its comparison, all jobs and wide ones."""
    cluster = json.loads(path.with_name(path.stem + "-cluster.json").read_text(encoding="utf-8"))
    nodes, per_node = int(cluster["nodes"]), int(cluster["gpus_per_node"])
    trace = read_trace(path, TraceFormat(node_gpus=per_node, cluster_gpus=nodes * per_node))
    recorded = recorded_waits(path)
    days = trace.span_s / 86400.0 + DRAIN_DAYS
    inputs = trace_input(trace, budgets=None, nodes=cluster_nodes(nodes, per_node), days=days, name=path.stem)
    began = time.perf_counter()
    engine = Engine(inputs, policy_config(policy), None, pass_interval_s=pass_interval_s)
    engine.run()
    wall_s = time.perf_counter() - began
    pairs, wide, never = [], [], 0
    for state in engine.jobs.values():
        spec = state.spec
        if state.first_start is None:
            never += 1
        start = state.first_start if state.first_start is not None else engine.horizon
        pair = (start - spec.submit_s, recorded[spec.ref])
        pairs.append(pair)
        if spec.gpus >= WIDE_GPUS:
            wide.append(pair)
    return {
        "trace": path.stem,
        "policy": policy,
        "gpus": nodes * per_node,
        "never_started": never,
        "all": compare([s for s, _ in pairs], [r for _, r in pairs]),
        "wide": compare([s for s, _ in wide], [r for _, r in wide]),
        "wall_s": round(wall_s, 2),
    }


# -- output ---------------------------------------------------------------------------------------


def markdown(rows: Sequence[dict]) -> str:
    """One table row per trace, policy and job set."""
    lines = [
        f"| trace | policy | jobs | mean s (sim / rec) | median s (sim / rec) | p90 s (sim / rec) "
        f"| p90 ratio | Spearman | within {FACTOR:g}x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for label, part in (("all", row["all"]), (f"{WIDE_GPUS}+ GPUs", row["wide"])):
            sim, rec = part["simulated"], part["recorded"]
            cells = [
                row["trace"],
                row["policy"],
                f"{label}: {part['jobs']:,}",
                *(f"{_num(sim[key])} / {_num(rec[key])}" for key in ("mean_s", "median_s", "p90_s")),
                _num(part["simulated_over_recorded"]["p90_ratio"]),
                _num(part["spearman"]),
                _num(part["within_2x"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _num(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3f}".rstrip("0")
    return f"{int(value):,}"  # type: ignore[call-overload]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="directory of fidelity traces")
    parser.add_argument("--policy", default="easy", help="a policy or a comma list (default easy)")
    parser.add_argument("--pass-interval-s", type=float, default=PASS_INTERVAL_S)
    parser.add_argument("--json", action="store_true", help="one JSON object per trace and policy")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    options = parser.parse_args(argv)
    paths = sorted(path for path in options.traces.glob("*.csv"))
    if not paths:
        parser.error(f"no traces in {options.traces}")
    policies = [name.strip() for name in options.policy.split(",") if name.strip()]
    rows = []
    for path in paths:
        for policy in policies:
            row = replay(path, policy, options.pass_interval_s)
            rows.append(row)
            if options.json or not options.markdown:
                print(json.dumps(row, sort_keys=True), flush=True)
    if options.markdown:
        print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
