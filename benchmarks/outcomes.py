"""Outcomes on real traces: every shared trace and the Ai2 month under every policy.

``python -m benchmarks.outcomes --json`` replays each trace in the shared traces folder (every
``NAME.csv`` with its ``NAME-budgets.csv`` and ``NAME-cluster.json``; not ``fidelity/``) and the
Ai2-like month (``ai2_scenario``, 30 days, seed 1) under every policy of the simulator's
``POLICIES`` (baselines added there appear here by themselves), with owners resubmitting ended work
(the simulator's default). It prints one JSON object per line per (trace, policy): the headline
numbers of issue 17's acceptance and ``wall_s``. Progress goes to stderr.

- ``--traces DIR``: the traces folder (default ``../shared/traces`` beside the repository).
- ``--only NAME`` (a trace's name or ``ai2``; repeatable), ``--policy P`` (repeatable),
  ``--days N`` (replay at most N days of each): a quick run.
- ``--markdown``: print the tables docs/simulator.md shows instead of JSON lines (every run,
  fair share against the best baseline on each acceptance measure, then each acceptance target
  with the inputs where fair share meets it and those where it does not);
  ``--from FILE.jsonl`` makes that table from an earlier run's lines without simulating.

Each line: ``trace``, ``policy``, ``days``, ``jobs``, ``gpus``; ``delivered_owed_ratio`` and
``min_team_delivered_owed_ratio`` (the lowest over allocations with owed > 0) and
``min_team_owed_gpu_hours`` (what that allocation was owed), ``teams``,
``teams_at_95pct``; ``jobs_completed``, ``funded_jobs_completed``, ``goodput_gpu_hours``, ``assigned_gpu_hours``,
``lost_gpu_hours_by_cause``, ``lost_preemption_share`` (GPU-hours lost to preemption over the
GPU-hours run), ``preemptions``, ``preemptions_per_1000_gpu_hours``, ``resubmissions``;
``funded_debug_interactive_wait_p90_s``, ``wait_p50_s``, ``wait_p90_s``, ``funded_wait_p50_s``,
``funded_wait_p90_s``, ``by_class``, ``by_size``, ``widest_band`` (the widest size band with at
least 20 jobs) and its ``widest_band_funded_wait_p90_s``; ``occupancy``,
``occupancy_when_contended``, ``contended_share``; ``wall_s``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter
from pathlib import Path
from typing import TextIO

from scheduling.simulator import POLICIES, SimulationInput, run_simulation
from scheduling.simulator.cluster import group_nodes, read_cluster_file
from scheduling.simulator.engine import DEFAULT_RESUBMIT_DELAY_S
from scheduling.simulator.options import add_resubmit_arguments, resubmit_delay
from scheduling.simulator.result import SIZE_BANDS
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
from scheduling.simulator.traces import TraceFormat, read_budgets, read_trace, trace_input

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = REPO_ROOT.parent / "shared" / "traces"
AI2 = "ai2"
AI2_MONTH = Ai2Parameters(days=30.0, seed=1)
WIDEST_BAND_MIN_JOBS = 20
SUMMARY_KEYS = (
    "days",
    "jobs",
    "gpus",
    "delivered_owed_ratio",
    "teams",
    "teams_at_95pct",
    "jobs_completed",
    "funded_jobs_completed",
    "goodput_gpu_hours",
    "assigned_gpu_hours",
    "lost_gpu_hours_by_cause",
    "preemptions",
    "preemptions_per_1000_gpu_hours",
    "resubmissions",
    "resubmit_delay_s",
    "funded_debug_interactive_wait_p90_s",
    "wait_p50_s",
    "wait_p90_s",
    "funded_wait_p50_s",
    "funded_wait_p90_s",
    "by_class",
    "by_size",
    "occupancy",
    "occupancy_when_contended",
    "contended_share",
)


class OutcomesError(RuntimeError):
    """The traces folder or one of its traces cannot be read."""


@dataclass(frozen=True)
class Case:
    """One input to replay: a shared trace (its CSV) or the Ai2 month (``path`` None)."""

    name: str
    path: Path | None = None


def find_cases(traces: Path, only: Sequence[str] = ()) -> list[Case]:
    """Every trace in ``traces`` (a CSV with a ``-budgets.csv`` and a ``-cluster.json`` beside it),
    by name, then the Ai2 month; only those named in ``only`` when it is not empty."""
    if not traces.is_dir():
        raise OutcomesError(
            f"no traces folder at {traces}: pass --traces DIR (the shared traces: NAME.csv, "
            "NAME-budgets.csv, NAME-cluster.json)"
        )
    cases = [
        Case(path.stem, path) for path in sorted(traces.glob("*.csv")) if not path.stem.endswith("-budgets")
    ]
    cases.append(Case(AI2))
    if only:
        unknown = sorted(set(only) - {case.name for case in cases})
        if unknown:
            names = ", ".join(case.name for case in cases)
            raise OutcomesError(f"unknown trace {', '.join(unknown)}; choose from {names}")
        cases = [case for case in cases if case.name in only]
    return cases


def case_input(case: Case, days: float | None, err: TextIO | None = None) -> SimulationInput:
    """The simulation input of ``case``, at most ``days`` long (None: all of it); the trace
    reader's warnings (adjusted jobs) go to ``err``."""
    if case.path is None:
        return ai2_scenario(AI2_MONTH if days is None else replace(AI2_MONTH, days=min(days, AI2_MONTH.days)))
    cluster_file = case.path.with_name(f"{case.name}-cluster.json")
    budgets_file = case.path.with_name(f"{case.name}-budgets.csv")
    for needed in (cluster_file, budgets_file):
        if not needed.is_file():
            raise OutcomesError(f"trace {case.name}: {needed} is missing")
    groups = read_cluster_file(cluster_file)
    trace = read_trace(case.path, TraceFormat(groups=groups))
    for warning in trace.warnings if err else ():
        err.write(f"{case.name}: {warning}\n")
    span_days = trace.span_s / 86400.0
    return trace_input(
        trace,
        budgets=read_budgets(budgets_file),
        nodes=group_nodes(groups),
        days=None if days is None or days >= span_days else days,
        parameters={"trace": case.name},
    )


def outcome(case: str, policy: str, summary: dict, wall_s: float) -> dict[str, object]:
    """The line printed for one run: the summary's headline numbers and what is derived from them."""
    line: dict[str, object] = {"trace": case, "policy": policy}
    line.update({key: summary.get(key) for key in SUMMARY_KEYS})
    lowest = min(summary.get("per_team", []), key=itemgetter("delivered_owed_ratio"), default=None)
    line["min_team_delivered_owed_ratio"] = None if lowest is None else lowest["delivered_owed_ratio"]
    line["min_team_owed_gpu_hours"] = None if lowest is None else lowest["owed_gpu_hours"]
    lost = summary.get("lost_gpu_hours_by_cause") or {}
    assigned = summary.get("assigned_gpu_hours") or 0.0
    line["lost_preemption_share"] = round(lost.get("preemption", 0.0) / assigned, 4) if assigned else None
    band = widest_band(summary.get("by_size") or {})
    line["widest_band"] = band
    line["widest_band_funded_wait_p90_s"] = (
        None if band is None else summary["by_size"][band]["funded_wait_p90_s"]
    )
    line["wall_s"] = round(wall_s, 2)
    return line


def widest_band(by_size: dict[str, dict]) -> str | None:
    """The widest size band with at least WIDEST_BAND_MIN_JOBS jobs (None: no band has that many)."""
    for key, _, _ in reversed(SIZE_BANDS):
        if (by_size.get(key) or {}).get("jobs", 0) >= WIDEST_BAND_MIN_JOBS:
            return key
    return None


def replay(
    cases: Sequence[Case],
    policies: Sequence[str],
    days: float | None,
    err: TextIO,
    resubmit_delay_s: float | None = DEFAULT_RESUBMIT_DELAY_S,
) -> Iterator[dict[str, object]]:
    """Run every (case, policy), yielding each line as it is done; progress on ``err``."""
    total, done = len(cases) * len(policies), 0
    for case in cases:
        inputs = case_input(case, days, err)
        for policy in policies:
            done += 1
            label = f"[{done}/{total}] {case.name} {policy}"
            err.write(f"{label}: {len(inputs.jobs)} jobs, {inputs.days:g} days\n")
            err.flush()
            began = time.perf_counter()
            result = run_simulation(
                inputs, policy=policy, progress=_progress(err, label), resubmit_delay_s=resubmit_delay_s
            )
            wall = time.perf_counter() - began
            err.write(f"{label}: done in {wall:.1f} s\n")
            err.flush()
            yield outcome(case.name, policy, result.summary, wall)


def _progress(err: TextIO, label: str):
    """Report every tenth of the simulated time (a long run in the background shows it moves)."""
    shown = [0]

    def progress(fraction: float) -> None:
        tenth = int(fraction * 10)
        if 0 < tenth < 10 and tenth > shown[0]:
            shown[0] = tenth
            err.write(f"{label}: {tenth * 10}%\n")
            err.flush()

    return progress


# -- the markdown table ---------------------------------------------------------------------------

COLUMNS = (
    ("delivered / owed", lambda line: _fixed(line.get("delivered_owed_ratio"), 2)),
    ("min team", lambda line: _fixed(line.get("min_team_delivered_owed_ratio"), 2)),
    ("jobs completed", lambda line: _count(line.get("jobs_completed"))),
    ("goodput GPU-h", lambda line: _count(line.get("goodput_gpu_hours"))),
    ("lost GPU-h: preemption / node failure", lambda line: _lost(line)),
    ("preemptions per 1,000 GPU-h", lambda line: _fixed(line.get("preemptions_per_1000_gpu_hours"), 1)),
    ("resubmissions", lambda line: _count(line.get("resubmissions"))),
    (
        "funded debug+interactive p90 (s)",
        lambda line: _count(line.get("funded_debug_interactive_wait_p90_s")),
    ),
    ("widest band: funded p90 (s)", lambda line: _band(line)),
    ("occupancy when contended", lambda line: _fixed(line.get("occupancy_when_contended"), 3)),
    ("wall (s)", lambda line: _count(line.get("wall_s"))),
)


def markdown(lines: Sequence[dict]) -> str:
    """One row per (trace, policy), in the order given."""
    head = "| trace | policy | " + " | ".join(name for name, _ in COLUMNS) + " |\n"
    rule = "|---|---|" + "---|" * len(COLUMNS) + "\n"
    rows = [
        f"| {line['trace']} | {line['policy']} | " + " | ".join(cell(line) for _, cell in COLUMNS) + " |\n"
        for line in lines
    ]
    return head + rule + "".join(rows)


def _by_trace(lines: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """trace -> policy -> its line, in the order given."""
    by_trace: dict[str, dict[str, dict]] = {}
    for line in lines:
        by_trace.setdefault(line["trace"], {})[line["policy"]] = line
    return by_trace


def against_baselines(lines: Sequence[dict], policy: str = "fairshare") -> str:
    """Per trace, ``policy`` against the best baseline on each of issue 17's acceptance measures
    (the best baseline per measure: most jobs completed, most goodput; ``easy`` for the widest band)."""
    head = (
        "| trace | delivered / owed | lowest team | funded debug+interactive p90 (s) "
        "| jobs completed / best baseline | funded jobs completed / best baseline "
        "| goodput / best baseline | lost to preemption / GPU-h run "
        "| widest band's funded p90 / easy's | occupancy when contended |\n"
    )
    rows = [head, "|---|---|---|---|---|---|---|---|---|---|\n"]
    for trace, runs in _by_trace(lines).items():
        line, others = runs.get(policy), [run for name, run in runs.items() if name != policy]
        if line is None or not others:
            continue
        cells = [
            _fixed(line.get("delivered_owed_ratio"), 2),
            _lowest_team(line),
            _count(line.get("funded_debug_interactive_wait_p90_s")),
            _against(share_of_best(line, runs, "jobs_completed", policy)),
            _against(share_of_best(line, runs, "funded_jobs_completed", policy)),
            _against(share_of_best(line, runs, "goodput_gpu_hours", policy)),
            _percent(line.get("lost_preemption_share")),
            _against(band_against_easy(line, runs)),
            _fixed(line.get("occupancy_when_contended"), 3),
        ]
        rows.append(f"| {trace} | " + " | ".join(cells) + " |\n")
    return "".join(rows)


def share_of_best(line: dict, runs: dict[str, dict], key: str, policy: str) -> tuple[float, str] | None:
    """``line[key]`` over the best other policy's (the largest) and that policy's name; None when
    either is missing or the best is 0."""
    others = [run for name, run in runs.items() if name != policy]
    best = max(others, key=lambda other: other.get(key) or 0, default=None)
    if best is None or not best.get(key) or line.get(key) is None:
        return None
    return line[key] / best[key], best["policy"]


def band_against_easy(line: dict, runs: dict[str, dict]) -> tuple[float, str] | None:
    """The widest band's funded p90 over ``easy``'s in the same band, and the band; None without
    an ``easy`` run of the same widest band (or when its p90 is 0)."""
    easy, band = runs.get("easy"), line.get("widest_band")
    if easy is None or band is None or easy.get("widest_band") != band:
        return None
    mine, theirs = line.get("widest_band_funded_wait_p90_s"), easy.get("widest_band_funded_wait_p90_s")
    return None if mine is None or not theirs else (mine / theirs, band)


def _against(compared: tuple[float, str] | None) -> str:
    return "-" if compared is None else f"{compared[0]:.2f} ({compared[1]})"


@dataclass(frozen=True)
class Target:
    """One of issue 17's acceptance targets: its words, what it measures of one input's runs
    (``measure(line, runs)``: the policy's line, every run of that input by policy; None when not
    measured), the bound, and whether the measure must be at least (else at most) the bound."""

    words: str
    measure: Callable[[dict, dict[str, dict]], float | None]
    bound: float
    at_least: bool
    shown: Callable[[float], str]

    def met(self, value: float) -> bool:
        return value >= self.bound if self.at_least else value <= self.bound


def _ratio_to_best(key: str) -> Callable[[dict, dict[str, dict]], float | None]:
    def measure(line: dict, runs: dict[str, dict]) -> float | None:
        compared = share_of_best(line, runs, key, line["policy"])
        return None if compared is None else compared[0]

    return measure


def _band_ratio(line: dict, runs: dict[str, dict]) -> float | None:
    compared = band_against_easy(line, runs)
    return None if compared is None else compared[0]


TARGETS = (
    Target("delivered / owed >= 0.99", lambda line, _: line.get("delivered_owed_ratio"), 0.99, True,
           lambda value: f"{value:.4f}"),
    Target("every allocation with owed > 0 at >= 95%",
           lambda line, _: line.get("min_team_delivered_owed_ratio"), 0.95, True, lambda value: f"{value:.2f}"),
    Target("funded debug and interactive p90 <= 30 s",
           lambda line, _: line.get("funded_debug_interactive_wait_p90_s"), 30.0, False,
           lambda value: f"{value:,.0f} s"),
    Target("jobs completed >= 0.97 x the best baseline's", _ratio_to_best("jobs_completed"), 0.97, True,
           lambda value: f"{value:.2f}"),
    Target("goodput >= 0.97 x the best baseline's", _ratio_to_best("goodput_gpu_hours"), 0.97, True,
           lambda value: f"{value:.2f}"),
    Target("lost to preemption <= 1% of GPU-hours run", lambda line, _: line.get("lost_preemption_share"),
           0.01, False, lambda value: f"{value * 100:.2f}%"),
    Target("widest band's funded p90 <= 2 x easy's", _band_ratio, 2.0, False, lambda value: f"{value:.2f}"),
    Target("occupancy when contended >= 0.97", lambda line, _: line.get("occupancy_when_contended"), 0.97, True,
           lambda value: f"{value:.3f}"),
)  # fmt: skip


def verdicts(lines: Sequence[dict], policy: str = "fairshare") -> str:
    """Per acceptance target (``TARGETS``), the inputs where ``policy`` meets it and those where
    it does not, with the value measured there; an input where a target cannot be measured (no
    baseline run, say) is in neither."""
    rows = ["| target | met on | missed on (measured) |\n", "|---|---|---|\n"]
    measured = [(trace, runs[policy], runs) for trace, runs in _by_trace(lines).items() if policy in runs]
    for target in TARGETS:
        met, missed = [], []
        for trace, line, runs in measured:
            value = target.measure(line, runs)
            if value is None:
                continue
            if target.met(value):
                met.append(trace)
            else:
                missed.append(f"{trace} ({target.shown(value)})")
        rows.append(f"| {target.words} | {', '.join(met) or '-'} | {', '.join(missed) or '-'} |\n")
    return "".join(rows)


def tables(lines: Sequence[dict]) -> str:
    """What ``--markdown`` prints: every run, fair share against the best baseline, the verdicts."""
    return markdown(lines) + "\n" + against_baselines(lines) + "\n" + verdicts(lines)


def _lowest_team(line: dict) -> str:
    """The lowest team's delivered/owed, with what it was owed: a team owed a few GPU-hours is
    decided by a handful of its jobs' waits."""
    ratio = _fixed(line.get("min_team_delivered_owed_ratio"), 2)
    owed = line.get("min_team_owed_gpu_hours")
    if not isinstance(owed, int | float):
        return ratio
    digits = 2 if owed < 1 else 1 if owed < 100 else 0
    return f"{ratio} (owed {owed:,.{digits}f} GPU-h)"


def _percent(value: object) -> str:
    return "-" if value is None else f"{float(value) * 100:.1f}%"  # type: ignore[arg-type]


def _fixed(value: object, digits: int) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"  # type: ignore[arg-type]


def _count(value: object) -> str:
    return "-" if value is None else f"{float(value):,.0f}"  # type: ignore[arg-type]


def _lost(line: dict) -> str:
    lost = line.get("lost_gpu_hours_by_cause") or {}
    return f"{_count(lost.get('preemption'))} / {_count(lost.get('node_failure'))}"


def _band(line: dict) -> str:
    band = line.get("widest_band")
    return "-" if band is None else f"{_count(line.get('widest_band_funded_wait_p90_s'))} ({band})"


# -- the command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line (the default)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table instead")
    parser.add_argument("--from", dest="source", metavar="FILE.jsonl", help="tabulate an earlier run")
    parser.add_argument("--traces", metavar="DIR", default=str(DEFAULT_TRACES), help="default %(default)s")
    parser.add_argument("--only", action="append", default=[], metavar="TRACE", help="a trace's name or ai2")
    parser.add_argument("--policy", action="append", default=[], help=f"one of {', '.join(POLICIES)}")
    parser.add_argument("--days", type=float, default=None, help="replay at most N days of each input")
    add_resubmit_arguments(parser)
    options = parser.parse_args(argv)
    if options.source:
        lines = [
            json.loads(text) for text in Path(options.source).read_text(encoding="utf-8").splitlines() if text
        ]
        out.write(tables(lines))
        return 0
    unknown = [name for name in options.policy if name not in POLICIES]
    if unknown:
        parser.error(f"unknown policy {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    policies = options.policy or list(POLICIES)
    try:
        cases = find_cases(Path(options.traces), options.only)
        lines = []
        for line in replay(cases, policies, options.days, err, resubmit_delay(vars(options))):
            lines.append(line)
            if not options.markdown:
                out.write(json.dumps(line, sort_keys=True) + "\n")
                out.flush()
    except (OutcomesError, OSError, ValueError) as error:
        err.write(f"error: {error}\n")
        return 2
    if options.markdown:
        out.write(tables(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
