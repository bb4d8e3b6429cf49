"""Read a job trace and a budgets file (CSV) into a :class:`SimulationInput`.

Trace: one row per job, a header naming the columns. Our column names (``--map FIELD=COLUMN``
renames them, so Philly / Helios / Alibaba PAI style traces replay after a simple rename):

| field           | required | meaning                                                              |
|-----------------|----------|----------------------------------------------------------------------|
| submit_time     | yes      | seconds (any origin) or ISO 8601; the earliest submit becomes t = 0  |
| allocation      | yes      | the allocation path the job is charged to, e.g. ``nlp/olmo``         |
| user            | yes      | who submitted it                                                     |
| gpus            | yes      | GPUs (after ``--gpu-scale``, rounded up; PAI's plan_gpu=50 is 0.5)   |
| gpu_type        | no       | the GPU type the job needs (default: any); matched without case      |
| duration_s      | yes*     | seconds of work; *or* give ``start_time`` and ``end_time``           |
| min_runtime_s   | no       | the contract's minimum runtime (default 0: fully preemptible)        |
| resumable       | no       | true/false, yes/no, 1/0 (default false)                              |
| class           | no       | debug, interactive or batch (default batch)                          |
| gpus_per_node   | no       | how to split a multi-node job (default: the policy decides)          |
| max_runtime_s   | no       | declared maximum runtime (used for backfill)                         |
| priority        | no       | integer class for the old "priority" policy (default 0; without the  |
|                 |          | column, from the class: debug and interactive 1, batch 0)            |
| checkpoint_s    | no       | how often resumable work saves progress (default 1800); the column   |
|                 |          | may be named ``checkpoint_interval_s``, as the API names the field   |
| busy            | no       | fraction of its GPU time the job computes, 0-1 (default 1)           |
| id              | no       | the trace's own job id, kept for reference                           |

Budgets: a CSV with columns ``allocation,gpus``. The tree follows from the paths (``a/b/c`` hangs
under ``a/b``); a node that is not listed gets the sum of its children's budgets. Without a
budgets file every allocation in the trace gets an equal share of 85% of the cluster.

Every malformed row is reported with its line number and column (``file.csv:17: gpus must be
...``). A well-formed request the cluster cannot place as written is adjusted or skipped instead
(:func:`scheduling.simulator.cluster.fit_job`), each kind counted in ``Trace.adjustments`` and
warned about once (``Trace.warnings``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec
from scheduling.simulator.cluster import NodeGroup, fit_job, group_nodes
from scheduling.simulator.model import WORKLOAD_CLASSES, NodeOutage, SimJob, SimulationInput

TRACE_FIELDS = (
    "submit_time",
    "allocation",
    "user",
    "gpus",
    "gpu_type",
    "duration_s",
    "start_time",
    "end_time",
    "min_runtime_s",
    "resumable",
    "class",
    "gpus_per_node",
    "max_runtime_s",
    "priority",
    "checkpoint_s",
    "busy",
    "id",
)
# Other names a column may have: field -> its name elsewhere (the API's, the Workload model's).
ALIASES = {"checkpoint_s": "checkpoint_interval_s"}
EQUAL_SHARE_OF_CLUSTER = 0.85
MAX_ERRORS_SHOWN = 20
_TRUE, _FALSE = {"1", "true", "yes", "y", "t"}, {"0", "false", "no", "n", "f", ""}
# Without a priority column, the "priority" policy's class of a job follows its workload class, as
# on a cluster from before fair share: short and interactive work above batch.
CLASS_PRIORITY = {"debug": 1, "interactive": 1, "batch": 0}
# Each kind of adjustment made to a well-formed row, as the warning says it (with its count).
ADJUSTMENTS = {
    "skipped_no_gpus": "job(s) without GPUs (gpus 0) skipped",
    "skipped_unknown_gpu_type": "job(s) asking for a GPU type no node has skipped",
    "skipped_too_large": "job(s) wider than every node of their type together skipped",
    "skipped_bad_rows": "malformed row(s) skipped (--skip-bad-rows)",
    "rounded_up_fractional": "fractional GPU request(s) rounded up to whole GPUs",
    "reshaped_gpus_per_node": "job(s) asking for more GPUs per node than a node has re-split at the node size",
    "rounded_up_wide": "wide job(s) not filling whole nodes rounded up to whole nodes",
}


class TraceError(ValueError):
    """A trace or budgets file has bad rows; ``errors`` lists them as ``file:line: message``."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.errors = errors
        shown = "\n".join(f"  {error}" for error in errors[:MAX_ERRORS_SHOWN])
        more = f"\n  ... and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
        super().__init__(f"{len(errors)} bad row(s) in {source}:\n{shown}{more}")


@dataclass(frozen=True)
class TraceFormat:
    """How to read a trace: column renames, GPU scaling, a prefix for allocation paths."""

    columns: Mapping[str, str] = field(default_factory=dict)  # field -> column in the file
    gpu_scale: float = 1.0
    allocation_prefix: str = ""
    node_gpus: int = 8  # the cluster, when ``groups`` is empty: nodes of this size ...
    cluster_gpus: int = 1000  # ... and this many GPUs in all
    groups: tuple[NodeGroup, ...] = ()  # the cluster's node groups (what jobs are fitted to)

    def column(self, name: str) -> str:
        return self.columns.get(name, name)

    def node_groups(self) -> tuple[NodeGroup, ...]:
        return self.groups or (NodeGroup(max(1, self.cluster_gpus // self.node_gpus), self.node_gpus),)


@dataclass
class Trace:
    jobs: list[SimJob]
    skipped: list[str]  # bad rows left out (only with skip_bad_rows)
    span_s: float  # last submit time
    adjustments: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ADJUSTMENTS, 0))
    warnings: list[str] = field(default_factory=list)  # one per kind of adjustment made


def parse_column_map(pairs: Iterable[str]) -> dict[str, str]:
    """``["gpus=gpu_num", "allocation=vc"]`` -> ``{"gpus": "gpu_num", "allocation": "vc"}``."""
    mapping = {}
    for pair in pairs:
        name, sep, column = pair.partition("=")
        if not sep or not column or name not in TRACE_FIELDS:
            raise ValueError(
                f"--map expects FIELD=COLUMN with FIELD one of {', '.join(TRACE_FIELDS)}; got {pair!r}"
            )
        mapping[name] = column
    return mapping


# -- the trace ----------------------------------------------------------------------------------


def read_trace(path: str | Path, fmt: TraceFormat | None = None, *, skip_bad_rows: bool = False) -> Trace:
    """The jobs of a trace, fitted to ``fmt``'s cluster; malformed rows raise :class:`TraceError`
    (or, with ``skip_bad_rows``, are left out and listed), adjusted ones are counted by kind."""
    fmt = fmt or TraceFormat()
    source = str(path)
    counts = dict.fromkeys(ADJUSTMENTS, 0)
    first_line: dict[str, int] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        fmt = _with_aliases(fmt, header)
        _check_header(source, header, fmt)
        has_priority = fmt.column("priority") in header
        rows, errors = [], []
        for row in reader:
            try:
                parsed, kinds = _parse_row(row, fmt, has_priority)
            except ValueError as error:
                errors.append(f"{source}:{reader.line_num}: {error}")
                kinds = ("skipped_bad_rows",)
                parsed = None
            for kind in kinds:
                counts[kind] += 1
                first_line.setdefault(kind, reader.line_num)
            if parsed is not None:
                rows.append((reader.line_num, parsed))
    if errors and not skip_bad_rows:
        raise TraceError(source, errors)
    warnings = adjustment_warnings(source, counts, first_line)
    if not rows:
        raise TraceError(source, [f"{source}: no usable rows", *warnings])
    trace = _numbered(rows, errors)
    trace.adjustments = counts
    trace.warnings = warnings
    return trace


def adjustment_warnings(source: str, counts: Mapping[str, int], first_line: Mapping[str, int]) -> list[str]:
    """One line per kind of adjustment made: its count, what it did, and the first row it hit."""
    return [
        f"warning: {source}: {counts[kind]} {message}, first at line {first_line[kind]}"
        for kind, message in ADJUSTMENTS.items()
        if counts[kind] and kind != "skipped_bad_rows"
    ]


def _with_aliases(fmt: TraceFormat, header: list[str]) -> TraceFormat:
    """``fmt`` reading a field from its other name (``ALIASES``) when the file has that column,
    not the field's own, and no ``--map`` renamed the field."""
    columns = dict(fmt.columns)
    for name, alias in ALIASES.items():
        if name not in columns and name not in header and alias in header:
            columns[name] = alias
    return replace(fmt, columns=columns)


def _check_header(source: str, header: list[str], fmt: TraceFormat) -> None:
    needed = ["submit_time", "allocation", "user", "gpus"]
    has_duration = fmt.column("duration_s") in header
    needed += [] if has_duration else ["start_time", "end_time"]
    missing = [f"{name} (column {fmt.column(name)!r})" for name in needed if fmt.column(name) not in header]
    if missing:
        hint = "" if has_duration else "; give duration_s, or start_time and end_time"
        raise TraceError(source, [f"{source}:1: missing column(s): {', '.join(missing)}{hint}"])


def _parse_row(
    row: Mapping[str, str], fmt: TraceFormat, has_priority: bool
) -> tuple[dict | None, tuple[str, ...]]:
    """A row's fields (None when it is skipped) and the kinds of adjustment made to it; a
    malformed field raises ValueError, whatever else is wrong with the row."""
    value = _Row(row, fmt)
    allocation = fmt.allocation_prefix + value.text("allocation")
    workload_class = value.workload_class()
    parsed = {
        "submit": value.time("submit_time"),
        "allocation": allocation.strip("/"),
        "user": value.text("user"),
        "duration": value.duration(),
        "min_runtime": value.optional_float("min_runtime_s") or 0.0,
        "resumable": value.boolean("resumable"),
        "class": workload_class,
        "max_runtime": value.optional_float("max_runtime_s"),
        "priority": (value.optional_int("priority") or 0) if has_priority else class_priority(workload_class),
        "checkpoint": value.optional_float("checkpoint_s"),
        "busy": value.fraction("busy"),
        "ref": value.raw("id"),
    }
    fit = fit_job(
        value.gpus(),
        value.optional_int("gpus_per_node") or None,
        value.raw("gpu_type") or None,
        fmt.node_groups(),
    )
    if fit.skip:
        return None, (*fit.adjustments, fit.skip)
    parsed.update(gpus=fit.gpus, per_node=fit.gpus_per_node, gpu_type=fit.gpu_type)
    return parsed, fit.adjustments


def class_priority(workload_class: str) -> int:
    """A job's class for the "priority" policy when the trace gives none: debug and interactive
    work above batch (``CLASS_PRIORITY``), so that policy differs from FIFO as a real one would."""
    return CLASS_PRIORITY[workload_class]


class _Row:
    """Typed reads of one CSV row; each raises ValueError naming the field and the bad value."""

    def __init__(self, row: Mapping[str, str], fmt: TraceFormat) -> None:
        self.row, self.fmt = row, fmt

    def raw(self, name: str) -> str:
        return (self.row.get(self.fmt.column(name)) or "").strip()

    def label(self, name: str) -> str:
        """The field, and its column when ``--map`` renamed it: ``gpus (column 'gpu_num')``."""
        column = self.fmt.column(name)
        return name if column == name else f"{name} (column {column!r})"

    def text(self, name: str) -> str:
        text = self.raw(name)
        if not text:
            raise ValueError(f"{self.label(name)} is empty")
        return text

    def number(self, name: str) -> float:
        text = self.text(name)
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{self.label(name)} must be a number, got {text!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"{self.label(name)} must be a finite number, got {text!r}")
        return number

    def optional_float(self, name: str) -> float | None:
        if not self.raw(name):
            return None
        number = self.number(name)
        if number < 0:
            raise ValueError(f"{self.label(name)} must not be negative, got {self.raw(name)!r}")
        return number

    def optional_int(self, name: str) -> int | None:
        number = self.optional_float(name)
        if number is not None and number != int(number):
            raise ValueError(f"{self.label(name)} must be a whole number, got {self.raw(name)!r}")
        return None if number is None else int(number)

    def gpus(self) -> float:
        """GPUs after ``--gpu-scale``, not rounded (0 is a CPU-only job; negative is an error)."""
        scaled = self.number("gpus") * self.fmt.gpu_scale
        if scaled < 0:
            raise ValueError(f"{self.label('gpus')} must not be negative, got {self.raw('gpus')!r}")
        return scaled

    def time(self, name: str) -> float:
        text = self.text(name)
        try:
            return float(text)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{self.label(name)} must be seconds or ISO 8601, got {text!r}") from None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()

    def duration(self) -> float:
        if self.raw("duration_s") or self.fmt.column("duration_s") in self.row:
            seconds = self.number("duration_s")
        else:
            seconds = self.time("end_time") - self.time("start_time")
        if seconds <= 0:
            raise ValueError(f"duration must be positive, got {seconds:g} s")
        return seconds

    def boolean(self, name: str) -> bool:
        text = self.raw(name).lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ValueError(f"{self.label(name)} must be true or false, got {self.raw(name)!r}")

    def workload_class(self) -> str:
        text = self.raw("class").lower() or "batch"
        if text not in WORKLOAD_CLASSES:
            raise ValueError(
                f"{self.label('class')} must be one of {', '.join(WORKLOAD_CLASSES)}, got {self.raw('class')!r}"
            )
        return text

    def fraction(self, name: str) -> float:
        number = self.optional_float(name)
        if number is not None and number > 1:
            raise ValueError(f"{self.label(name)} must be between 0 and 1, got {self.raw(name)!r}")
        return 1.0 if number is None else number


def _numbered(rows: list[tuple[int, dict]], skipped: list[str]) -> Trace:
    origin = min(parsed["submit"] for _, parsed in rows)
    ordered = sorted(rows, key=lambda pair: (pair[1]["submit"], pair[0]))
    jobs = [_job(number, line, parsed, origin) for number, (line, parsed) in enumerate(ordered, start=1)]
    return Trace(jobs=jobs, skipped=skipped, span_s=max(job.submit_s for job in jobs))


def _job(number: int, line: int, parsed: dict, origin: float) -> SimJob:
    checkpoint = parsed["checkpoint"]
    return SimJob(
        id=number,
        allocation=parsed["allocation"],
        user=parsed["user"],
        gpus=parsed["gpus"],
        submit_s=parsed["submit"] - origin,
        duration_s=parsed["duration"],
        workload_class=parsed["class"],
        min_runtime_s=parsed["min_runtime"],
        resumable=parsed["resumable"],
        max_runtime_s=parsed["max_runtime"],
        gpus_per_node=parsed["per_node"],
        gpu_type=parsed["gpu_type"],
        priority=parsed["priority"],
        checkpoint_s=1800.0 if checkpoint is None else checkpoint,
        busy=parsed["busy"],
        kind=parsed["class"],
        ref=parsed["ref"] or f"line-{line}",
    )


# -- budgets ------------------------------------------------------------------------------------


def read_budgets(path: str | Path) -> dict[str, float]:
    """``allocation,gpus`` rows -> {path: GPUs}; every bad row is reported with its line."""
    source, errors = str(path), []
    budgets: dict[str, float] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = {"allocation", "gpus"} - set(reader.fieldnames or [])
        if missing:
            raise TraceError(source, [f"{source}:1: missing column(s): {', '.join(sorted(missing))}"])
        for row in reader:
            try:
                allocation, gpus = _budget_row(row, budgets)
                budgets[allocation] = gpus
            except ValueError as error:
                errors.append(f"{source}:{reader.line_num}: {error}")
    if errors:
        raise TraceError(source, errors)
    return budgets


def _budget_row(row: Mapping[str, str], seen: Mapping[str, float]) -> tuple[str, float]:
    allocation = (row.get("allocation") or "").strip().strip("/")
    text = (row.get("gpus") or "").strip()
    if not allocation or any(not part for part in allocation.split("/")):
        raise ValueError(f"allocation must be a path like org/team, got {row.get('allocation')!r}")
    if allocation in seen:
        raise ValueError(f"allocation {allocation!r} is listed twice")
    try:
        gpus = float(text)
    except ValueError:
        raise ValueError(f"gpus must be a number, got {text!r}") from None
    if not math.isfinite(gpus) or gpus < 0:
        raise ValueError(f"gpus must be zero or more, got {text!r}")
    return allocation, gpus


def budget_tree(budgets: Mapping[str, float], allocations: Iterable[str]) -> tuple[BudgetNodeSpec, ...]:
    """The tree for ``budgets`` plus every allocation the trace charges (0 when not budgeted).

    A node that is not listed gets the sum of its children's budgets. Parents come before
    children; siblings are sorted by path.
    """
    paths = set(budgets) | set(allocations)
    for path in list(paths):
        parts = path.split("/")
        paths.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
    implied: dict[str, float] = {}
    for path in sorted(paths, key=lambda p: (-p.count("/"), p)):
        own = budgets.get(path, implied.get(path, 0.0))
        implied[path] = own
        parent = path.rpartition("/")[0]
        if parent and parent not in budgets:
            implied[parent] = implied.get(parent, 0.0) + own
    ordered = sorted(paths, key=lambda p: (p.count("/"), p))
    return tuple(BudgetNodeSpec(path, path.rpartition("/")[0] or None, implied[path]) for path in ordered)


def equal_budgets(allocations: Iterable[str], cluster_gpus: int) -> dict[str, float]:
    """Every allocation an equal share of 85% of the cluster."""
    names = sorted(set(allocations))
    share = round(EQUAL_SHARE_OF_CLUSTER * cluster_gpus / len(names), 3) if names else 0.0
    return dict.fromkeys(names, share)


# -- the input ----------------------------------------------------------------------------------


def cluster_nodes(
    nodes: int, gpus_per_node: int, *, nodes_per_domain: int = 0, gpu_type: str = "GPU"
) -> tuple[ClusterNodeSpec, ...]:
    """``nodes`` alike nodes: one group (see :func:`scheduling.simulator.cluster.group_nodes`)."""
    return group_nodes([NodeGroup(nodes, gpus_per_node, gpu_type)], nodes_per_domain=nodes_per_domain)


def trace_input(
    trace: Trace,
    *,
    budgets: Mapping[str, float] | None,
    nodes: tuple[ClusterNodeSpec, ...],
    days: float | None = None,
    outages: tuple[NodeOutage, ...] = (),
    name: str = "trace",
    parameters: Mapping[str, object] | None = None,
) -> SimulationInput:
    """Assemble the input; ``days`` defaults to the trace's span of submit times."""
    gpus = sum(node.gpus for node in nodes)
    charged = {job.allocation for job in trace.jobs}
    chosen = dict(budgets) if budgets is not None else equal_budgets(charged, gpus)
    span_days = days if days is not None else max(trace.span_s / 86400.0, 1 / 24)
    return SimulationInput(
        name=name,
        cluster_nodes=nodes,
        tree=budget_tree(chosen, charged),
        jobs=tuple(trace.jobs),
        days=round(span_days, 4),
        outages=outages,
        parameters=dict(parameters or {}),
        trace_adjustments=dict(trace.adjustments),
    )
