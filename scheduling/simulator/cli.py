"""The command line of ``python manage.py simulate`` and ``python -m scheduling.simulator``:
arguments, input building, output writing.

Kept apart from the management command so the command stays a thin entry point and nothing here
needs Django or a database: :func:`main` is the same command without Django.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from scheduling.simulator import (
    POLICIES,
    SimulationError,
    SimulationInput,
    SimulationResult,
    policy_config,
    run_simulation,
)
from scheduling.simulator.cluster import NodeGroup, group_nodes, read_cluster_file
from scheduling.simulator.options import add_resubmit_arguments, resubmit_delay
from scheduling.simulator.report import SIDE_BY_SIDE_KEYS, render_html
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario, node_outages
from scheduling.simulator.traces import (
    TraceError,
    TraceFormat,
    parse_column_map,
    read_budgets,
    read_trace,
    trace_input,
)

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SCENARIO_HELP = {
    "nodes": "nodes in the cluster",
    "gpus_per_node": "GPUs per node",
    "nodes_per_domain": "nodes per topology domain (IB island)",
    "gpu_type": "GPU type of every node",
    "teams": "funded teams (the budget tree's leaves)",
    "researchers": "researchers, spread over teams by budget",
    "allocated_share": "share of the cluster the budgets add up to",
    "funded_load": "funded GPU-hours offered per capacity GPU-hour, weekly mean",
    "unfunded_load": "unfunded (opportunistic) GPU-hours offered per capacity GPU-hour",
    "weekend_factor": "arrival rate at weekends relative to weekdays",
    "seasonality": "amplitude of each team's weekly cycle (0: none)",
    "debug_per_researcher_day": "debug jobs per researcher per day",
    "interactive_per_researcher_week": "interactive sessions per researcher per week",
    "sweeps_per_team_week": "sweeps (8-48 one-GPU jobs) per team per week",
    "unfunded_patience_h": "hours after which unstarted unfunded work is given up",
    "node_mtbf_days": "mean days between failures of one node (0: none)",
    "repair_median_h": "median hours to repair a failed node",
    "warmup_days": "days simulated before measuring (fills the cluster and the usage window)",
    "high_priority_share": "share of work marked high priority (read only by the priority policy)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", choices=["ai2"], help="generate an Ai2-like lab")
    source.add_argument("--trace", metavar="FILE.csv", help="replay a job trace (see docs/simulator.md)")
    parser.add_argument(
        "--policy", default="fairshare", help=f"one of {', '.join(POLICIES)}, a comma list, or 'all'"
    )
    parser.add_argument(
        "--days", type=float, default=None, help="measured days (default: 30, or the trace's span)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the scenario and node failures")
    parser.add_argument("--json", metavar="FILE", help="write the metrics as JSON ('-' for stdout)")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained Plotly report")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _add_policy_arguments(parser)
    add_resubmit_arguments(parser)
    _add_trace_arguments(parser)
    _add_scenario_arguments(parser)


def _add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("policy")
    group.add_argument("--window-days", type=float, default=7.0, help="usage window (default %(default)s)")
    group.add_argument("--half-life-days", type=float, default=None, help="decayed usage instead of a window")
    group.add_argument(
        "--min-runtime-cap-h", type=float, default=8.0, help="contract cap (default %(default)s)"
    )
    group.add_argument(
        "--pass-interval-s", type=float, default=10.0, help="seconds between passes (default %(default)s)"
    )


def _add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trace")
    group.add_argument(
        "--budgets", metavar="FILE.csv", help="allocation,gpus (default: equal shares of 85%%)"
    )
    group.add_argument(
        "--cluster-file",
        metavar="FILE.json",
        help='the cluster instead of --nodes: {"nodes": N, "gpus_per_node": G} or '
        '{"groups": [{"nodes": N, "gpus_per_node": G, "gpu_type": "a100"}, ...]}',
    )
    group.add_argument(
        "--nodes", type=int, default=None, help="nodes in the cluster (trace: this or --cluster-file)"
    )
    group.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node (trace: default 8)")
    group.add_argument(
        "--nodes-per-domain",
        type=int,
        default=None,
        help="nodes per topology domain (default: one domain; ai2: 25)",
    )
    group.add_argument(
        "--map", action="append", default=[], metavar="FIELD=COLUMN", help="rename a trace column"
    )
    group.add_argument(
        "--gpu-scale", type=float, default=1.0, help="multiply GPU counts (PAI plan_gpu: 0.01)"
    )
    group.add_argument("--allocation-prefix", default="", help="prepend to every allocation path")
    group.add_argument("--skip-bad-rows", action="store_true", help="report bad rows and replay the rest")
    group.add_argument(
        "--trace-mtbf-days", type=float, default=0.0, help="node failures for traces (0: none)"
    )


def _add_scenario_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scenario ai2 (defaults describe an Ai2-like lab)")
    for spec in dataclasses.fields(Ai2Parameters):
        if spec.name in ("days", "seed", "nodes", "gpus_per_node", "nodes_per_domain"):
            continue
        flag = "--" + spec.name.replace("_", "-")
        kind = type(spec.default)
        group.add_argument(
            flag, type=kind, default=spec.default, help=f"{SCENARIO_HELP[spec.name]} (default %(default)s)"
        )


# -- building the input -------------------------------------------------------------------------


def build_input(options: dict, *, out: SupportsWrite[str] = sys.stderr) -> SimulationInput:
    if options.get("scenario"):
        return ai2_scenario(_scenario_parameters(options))
    return _trace(options, out)


def _scenario_parameters(options: dict) -> Ai2Parameters:
    values = {}
    for spec in dataclasses.fields(Ai2Parameters):
        value = options.get(spec.name)
        if value is not None:
            values[spec.name] = value
    return Ai2Parameters(**values)


def trace_cluster(options: dict) -> tuple[NodeGroup, ...]:
    """The trace's cluster: ``--cluster-file``, or ``--nodes`` x ``--gpus-per-node`` (default 8)."""
    if options.get("cluster_file"):
        if options.get("nodes") or options.get("gpus_per_node"):
            raise ValueError(
                "give the cluster either as --cluster-file or as --nodes/--gpus-per-node, not both"
            )
        return read_cluster_file(options["cluster_file"])
    if not options.get("nodes"):
        raise ValueError(
            "--trace needs the cluster's shape: --cluster-file FILE.json, or --nodes N "
            "(and --gpus-per-node G, default 8)"
        )
    return (NodeGroup(options["nodes"], options.get("gpus_per_node") or 8),)


def _trace(options: dict, out: SupportsWrite[str]) -> SimulationInput:
    groups = trace_cluster(options)
    nodes = group_nodes(groups, nodes_per_domain=options.get("nodes_per_domain") or 0)
    fmt = TraceFormat(
        columns=parse_column_map(options.get("map") or []),
        gpu_scale=options.get("gpu_scale") or 1.0,
        allocation_prefix=options.get("allocation_prefix") or "",
        groups=groups,
    )
    trace = read_trace(options["trace"], fmt, skip_bad_rows=bool(options.get("skip_bad_rows")))
    for problem in trace.skipped:
        out.write(f"skipped {problem}\n")
    for warning in trace.warnings:
        out.write(f"{warning}\n")
    budgets = read_budgets(options["budgets"]) if options.get("budgets") else None
    days = options.get("days")
    horizon = (days or trace.span_s / 86400.0) * 86400.0
    rng = random.Random(options.get("seed", 1))
    outages = node_outages(
        rng, [node.name for node in nodes], horizon, options.get("trace_mtbf_days") or 0.0, 6.0
    )
    parameters = {
        "trace": str(options["trace"]),
        "budgets": options.get("budgets"),
        "seed": options.get("seed"),
    }
    if options.get("cluster_file"):
        parameters["cluster_file"] = str(options["cluster_file"])
    return trace_input(trace, budgets=budgets, nodes=nodes, days=days, outages=outages, parameters=parameters)


def policies(text: str) -> list[str]:
    names = list(POLICIES) if text == "all" else [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown or not names:
        raise ValueError(
            f"unknown policy {', '.join(unknown) or text!r}; choose from {', '.join(POLICIES)} or 'all'"
        )
    return names


def run_policies(
    inputs: SimulationInput, options: dict, *, err: TextIO = sys.stderr
) -> list[SimulationResult]:
    results = []
    for name in policies(options.get("policy") or "fairshare"):
        overrides = {
            "window_s": (options.get("window_days") or 7.0) * 86400.0,
            "half_life_s": options["half_life_days"] * 86400.0 if options.get("half_life_days") else None,
            "min_runtime_cap_s": (options.get("min_runtime_cap_h") or 8.0) * 3600.0,
        }
        bar = None if options.get("no_progress") else ProgressBar(err, f"{inputs.name} {name}")
        result = run_simulation(
            inputs,
            policy=name,
            config=policy_config(name, **overrides),
            pass_interval_s=options.get("pass_interval_s") or 10.0,
            progress=bar,
            resubmit_delay_s=resubmit_delay(options),
        )
        if bar:
            bar.done()
        results.append(result)
    return results


# -- the command without Django -----------------------------------------------------------------


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``python -m scheduling.simulator``: what ``manage.py simulate`` does, with no Django
    settings, secret key or database. Returns the exit status (1: the input or a run failed)."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m scheduling.simulator",
        description="Simulate the scheduler on an Ai2-like scenario or a CSV trace, and compare policies.",
    )
    add_arguments(parser)
    options = vars(parser.parse_args(argv))
    try:
        policies(str(options["policy"]))
        inputs = build_input(options, out=err)
        results = run_policies(inputs, options, err=err)
    except (TraceError, SimulationError, ValueError, OSError) as error:
        err.write(f"error: {error}\n")
        return 1
    write_outputs(results, options, out)
    return 0


# -- output -------------------------------------------------------------------------------------


class ProgressBar:
    """``[#########...........]  45%  ai2 fairshare`` redrawn in place on one line of stderr."""

    def __init__(self, stream: TextIO, label: str, width: int = 30) -> None:
        self.stream, self.label, self.width, self.shown = stream, label, width, -1

    def __call__(self, fraction: float) -> None:
        percent = min(100, int(fraction * 100))
        if percent != self.shown and (percent == 100 or self.stream.isatty()):
            self.shown = percent
            filled = self.width * percent // 100
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {percent:3d}%  {self.label}")
            self.stream.flush()

    def done(self) -> None:
        self(1.0)
        self.stream.write("\n")


def results_json(results: Sequence[SimulationResult]) -> str:
    """One object for one policy; a list of objects for several. Keys sorted (byte-stable)."""
    objects = [result.summary for result in results]
    return json.dumps(objects[0] if len(objects) == 1 else objects, sort_keys=True, indent=2) + "\n"


def write_outputs(results: Sequence[SimulationResult], options: dict, out: TextIO) -> None:
    if options.get("json") == "-":
        out.write(results_json(results))
    elif options.get("json"):
        Path(options["json"]).write_text(results_json(results), encoding="utf-8")
    if options.get("html"):
        title = f"Simulation: {results[0].summary['source']}, {results[0].summary['days']} days"
        Path(options["html"]).write_text(render_html(results, title), encoding="utf-8")
    if options.get("json") != "-":
        out.write(side_by_side(results))


def _by_class(result: SimulationResult) -> dict[str, dict[str, object]]:
    """The summary's waits per workload class."""
    table = result.summary.get("by_class", {})
    return table if isinstance(table, dict) else {}


def side_by_side(results: Sequence[SimulationResult]) -> str:
    keys = [
        "delivered_owed_ratio",
        "teams_at_95pct",
        "teams",
        "jain_index",
        "availability",
        "occupancy",
        "unallocated_share",
        "utilization",
        "demand_over_capacity",
        "wait_p50_s",
        "wait_p90_s",
        "preemptions",
        "lost_gpu_hours",
        "jobs",
        *SIDE_BY_SIDE_KEYS,
        "passes",
        "sim_wall_s",
    ]
    rows = [("", *[str(result.summary["policy"]) for result in results])]
    rows += [(key, *[str(result.summary.get(key)) for result in results]) for key in keys]
    for name in _by_class(results[0]):
        rows.append(
            (
                f"{name} wait p90 s",
                *[str(_by_class(r).get(name, {}).get("wait_p90_s")) for r in results],
            )
        )
    width = max(len(row[0]) for row in rows)
    table = "".join(
        f"{row[0]:<{width}}  " + "  ".join(f"{cell:>12}" for cell in row[1:]) + "\n" for row in rows
    )
    return table
