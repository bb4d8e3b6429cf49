"""Slurm's JSON output (`sinfo --json`, `squeue --json`, `sacct --json`, 22.05) parsed into plain classes.

This is the only module that knows Slurm's field names. Everything else reads ``SlurmNode``,
``SlurmJob`` and ``SlurmRun``. Times are Unix seconds; Slurm's 0 means "not set" and becomes None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

# Node states and flags that take a node out of service (sinfo's "state" and "state_flags").
UNHEALTHY_NODE_STATES = frozenset(
    {"down", "drain", "drained", "draining", "fail", "failing", "future", "unknown"}
)
UNHEALTHY_NODE_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "FAIL", "NOT_RESPONDING", "MAINTENANCE"})

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_DURATION_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_GPU_COUNT = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
_GRES_GPU = re.compile(r"gpu(?::([A-Za-z][\w.-]*))?:(\d+)")


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: int
    gpu_type: str  # the GRES type ("a100" in gpu:a100:8), "" when the GRES is untyped
    state: str  # sinfo's base state, lower case: idle, mixed, allocated, down, ...
    flags: tuple[str, ...]  # DRAIN, NOT_RESPONDING, ...
    reason: str
    partitions: tuple[str, ...] = ()

    @property
    def healthy(self) -> bool:
        return self.state not in UNHEALTHY_NODE_STATES and not UNHEALTHY_NODE_FLAGS.intersection(self.flags)

    @property
    def health_reason(self) -> str:
        """What Slurm says is wrong, e.g. "DRAIN: bad gpu"; empty when healthy."""
        if self.healthy:
            return ""
        label = next((flag for flag in self.flags if flag in UNHEALTHY_NODE_FLAGS), self.state.upper())
        return f"{label}: {self.reason}" if self.reason else label


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: int
    name: str
    state: str  # squeue's job_state: PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, ...
    reason: str
    account: str
    user: str
    gpus: int  # total over all nodes
    gpus_per_node: int | None  # set when the job asked per node (--gres=gpu:N)
    node_count: int
    nodes: str  # Slurm hostlist expression, e.g. "n[1-2]"; "" when not allocated
    required_nodes: str
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    restarts: int
    requeue: bool  # submitted with --requeue (or JobRequeue=1)
    held: bool  # priority 0: waiting for the portal
    comment: str
    admin_comment: str = ""  # the portal writes "portal_attempt=N" here when it starts the job
    partition: str = ""
    array_job_id: int = 0  # set for an array's tasks (and its pending, not yet split record)
    array_task_id: int | None = None
    time_limit_s: float | None = None  # --time; None when unlimited
    eligible_at: float | None = None  # the begin time; far ahead while the job waits for the portal

    @property
    def ref(self) -> str:
        """The job as scontrol names it: "123", or "120_5" for task 5 of array 120."""
        if self.array_job_id and self.array_task_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        return str(self.job_id)


@dataclass(frozen=True, slots=True)
class SlurmRun:
    """One row of sacct: a contiguous run of a job (a requeued job has one row per run)."""

    job_id: int
    state: str
    nodes: str
    started_at: float | None
    ended_at: float | None


def parse_duration(text: str) -> float | None:
    """Seconds in "90", "90s", "30m", "2h", "1d", "1h30m"; None when the text is not a duration."""
    text = text.strip().lower()
    parts = _DURATION_PART.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _DURATION_UNIT_S[unit] for number, unit in parts)


def parse_comment(comment: str) -> dict[str, str]:
    """Key=value pairs separated by commas, semicolons or spaces: "min_runtime=2h,resumable=yes"."""
    pairs = (item.split("=", 1) for item in re.split(r"[,; ]+", comment or "") if "=" in item)
    return {key.strip().lower(): value.strip() for key, value in pairs}


def checkpoint_interval(keys: dict[str, str]) -> float | None:
    """`checkpoint=30m` in a job's comment (the duration syntax of `min_runtime`): how often the
    job saves its progress, so a preemption loses at most that much. None when absent, unreadable
    or not positive."""
    declared = parse_duration(keys.get("checkpoint", ""))
    return declared if declared is not None and declared > 0 else None


def parse_bool(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in {"1", "yes", "true", "y", "on"}:
        return True
    if lowered in {"0", "no", "false", "n", "off"}:
        return False
    return None


def expand_hostlist(expression: str) -> tuple[str, ...]:
    """Slurm's compressed host list ("n[1-3,5],gpu7") expanded to sorted names."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", expression or ""):
        if plain:
            names.append(plain)
            continue
        names.extend(prefix + suffix for suffix in _expand_ranges(ranges))
    return tuple(sorted(names))


def _expand_ranges(ranges: str) -> list[str]:
    suffixes: list[str] = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        width = len(low)
        suffixes.extend(str(n).zfill(width) for n in range(int(low), int(high or low) + 1))
    return suffixes


def _time(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _gpus_in_gres(gres: str) -> tuple[int, str]:
    match = _GRES_GPU.search(gres or "")
    return (int(match.group(2)), match.group(1) or "") if match else (0, "")


def node_from_json(data: dict) -> SlurmNode:
    gpus, gpu_type = _gpus_in_gres(data.get("gres", ""))
    return SlurmNode(
        name=data["name"],
        gpus=gpus,
        gpu_type=gpu_type,
        state=str(data.get("state", "unknown")).lower(),
        flags=tuple(str(flag).upper() for flag in data.get("state_flags") or ()),
        reason=data.get("reason") or "",
        partitions=tuple(data.get("partitions") or ()),
    )


NO_VAL = 0xFFFFFFFE  # Slurm's "not set" / "unlimited" for 32-bit numbers


def _minutes(value: object) -> float | None:
    return float(value) * 60.0 if isinstance(value, int) and 0 < value < NO_VAL else None


def expand_array_tasks(expression: str) -> tuple[int, ...]:
    """Task ids of a pending array record: "1-4,6,8-20:2%4" (":step", "%throttle") to numbers."""
    ids: list[int] = []
    for part in expression.partition("%")[0].split(","):
        if not part:
            continue
        span, _, step = part.partition(":")
        low, _, high = span.partition("-")
        ids.extend(range(int(low), int(high or low) + 1, int(step or 1)))
    return tuple(ids)


def job_from_json(data: dict) -> SlurmJob:
    per_node = data.get("tres_per_node") or ""
    total = _GPU_COUNT.search(data.get("tres_req_str") or "")
    task = data.get("array_task_id")
    return SlurmJob(
        job_id=int(data["job_id"]),
        name=data.get("name") or "",
        state=str(data.get("job_state", "")).upper(),
        reason=data.get("state_reason") or "",
        account=data.get("account") or "",
        user=data.get("user_name") or "",
        gpus=int(total.group(1)) if total else 0,
        gpus_per_node=_gpus_in_gres(per_node)[0] or None,
        node_count=int(data.get("node_count") or 1),
        nodes=data.get("nodes") or "",
        required_nodes=data.get("required_nodes") or "",
        submitted_at=_time(data.get("submit_time")),
        started_at=_time(data.get("start_time")),
        ended_at=_time(data.get("end_time")),
        restarts=int(data.get("restart_cnt") or 0),
        requeue=bool(data.get("requeue")),
        held=data.get("priority") == 0,
        comment=data.get("comment") or "",
        admin_comment=data.get("admin_comment") or "",
        partition=data.get("partition") or "",
        array_job_id=int(data.get("array_job_id") or 0),
        array_task_id=int(task) if isinstance(task, int) and task < NO_VAL else None,
        time_limit_s=_minutes(data.get("time_limit")),
        eligible_at=_time(data.get("eligible_time")),
    )


def jobs_from_json(data: dict) -> tuple[SlurmJob, ...]:
    """One job, or every task of an array's pending record (they share one record until split)."""
    job = job_from_json(data)
    tasks = data.get("array_task_string") or ""
    if not job.array_job_id or job.array_task_id is not None or not tasks:
        return (job,)
    return tuple(replace(job, array_task_id=task) for task in expand_array_tasks(tasks))


def run_from_json(data: dict) -> SlurmRun:
    times = data.get("time") or {}
    return SlurmRun(
        job_id=int(data["job_id"]),
        state=str((data.get("state") or {}).get("current", "")).upper(),
        nodes=data.get("nodes") or "",
        started_at=_time(times.get("start")),
        ended_at=_time(times.get("end")),
    )


class SlurmReportedError(ValueError):
    """The JSON carries errors instead of data (22.05's squeue does this, exit 0, when slurmctld is down)."""


def _document(text: str, key: str) -> list[dict]:
    document = json.loads(text)
    errors = [error for error in document.get("errors") or () if error]
    if errors:
        raise SlurmReportedError("; ".join(_error_text(error) for error in errors))
    return list(document.get(key) or ())


def _error_text(error: dict) -> str:
    return f"{error.get('source', 'slurm')}: {error.get('description') or error.get('error', '')}"


def parse_sinfo(text: str) -> tuple[SlurmNode, ...]:
    """Nodes from `sinfo --json`, one per name (sinfo repeats a node once per partition), sorted."""
    nodes = {node.name: node for node in map(node_from_json, _document(text, "nodes"))}
    return tuple(nodes[name] for name in sorted(nodes))


def parse_squeue(text: str) -> tuple[SlurmJob, ...]:
    """Jobs from `squeue --json` (array tasks one by one), sorted by job id then task."""
    return read_squeue(text)[0]


def read_squeue(text: str) -> tuple[tuple[SlurmJob, ...], tuple[tuple[str, str], ...]]:
    """(jobs, unreadable): a record that cannot be read is returned as (its job id, the error)
    instead of failing the whole listing."""
    jobs: list[SlurmJob] = []
    unreadable: list[tuple[str, str]] = []
    for data in _document(text, "jobs"):
        try:
            jobs.extend(jobs_from_json(data))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            ref = str(data.get("job_id", "?")) if isinstance(data, dict) else "?"
            unreadable.append((ref, f"unreadable squeue record: {type(error).__name__}: {error}"))
    ordered = sorted(
        jobs, key=lambda job: (job.array_job_id or job.job_id, job.array_task_id or 0, job.job_id)
    )
    return tuple(ordered), tuple(unreadable)


def parse_sacct(text: str) -> tuple[SlurmRun, ...]:
    """Runs from `sacct --json -X`, sorted by job id then start (requeued jobs have several)."""
    runs = map(run_from_json, _document(text, "jobs"))
    return tuple(sorted(runs, key=lambda run: (run.job_id, run.started_at or 0.0)))
