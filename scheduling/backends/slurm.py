"""The Slurm backend: observe and apply through Slurm's CLI with JSON output. No policy here.

Race-free control (docs/backends.md):
- Every GPU job waits when it is submitted: job_submit.lua sets its begin time far ahead (the
  portal's own submissions pass --begin the same way), so nothing starts until the portal admits
  it. CPU-only jobs are not the portal's (the lua and observe() leave them alone). A priority-0
  hold is someone else's (a user's `scontrol hold`) unless AdminComment says portal_hold=1.
- start: pin the placement (`scontrol update JobId=X NodeList=... StartTime=now`); a job the portal
  requeued and held is released. Array tasks are addressed one by one (`120_5`). docs/slurm.md.
- preempt, resumable: `scontrol requeuehold X` (back to waiting for the portal, same job id);
  preempt, not resumable: `scancel X` (Slurm sends SIGTERM, then SIGKILL after KillWait).
  With the cluster's grace period (``PreemptAction.grace_s`` > 0), GraceTime-style: first
  `scancel --signal=TERM --full X` and a `portal_term` mark in AdminComment (the job keeps running
  and reads as already waiting, or ended, to the portal); once the grace has passed a later pass
  calls ``finish_preemptions``, which requeues-and-holds or cancels it.
- cancel: `scancel X`. Ended jobs (completed, failed, cancelled) are read from `squeue -t all`.
Every command runs with a timeout; a controller that does not answer raises BackendUnavailable.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from .base import (
    Action,
    ActionsRefused,
    BackendUnavailable,
    CancelAction,
    ClusterState,
    JobState,
    ObservedJob,
    ObservedNode,
    PreemptAction,
    StartAction,
    SubmitRequest,
    UnreadableJob,
)
from .slurm_accounts import account_name, is_shortened, path_for_account
from .slurm_parse import (
    SlurmJob,
    SlurmNode,
    SlurmReportedError,
    SlurmRun,
    checkpoint_interval,
    expand_hostlist,
    parse_bool,
    parse_comment,
    parse_duration,
    parse_sacct,
    parse_sinfo,
    read_squeue,
)

if TYPE_CHECKING:
    from scheduling.models import Cluster

logger = logging.getLogger(__name__)
T = TypeVar("T")

JOB_STATES = {
    "PENDING": JobState.WAITING,
    "REQUEUED": JobState.WAITING,
    "REQUEUE_HOLD": JobState.WAITING,
    "REQUEUE_FED": JobState.WAITING,
    "CONFIGURING": JobState.RUNNING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.CANCELLED,
    "PREEMPTED": JobState.CANCELLED,
    "FAILED": JobState.FAILED,
    "TIMEOUT": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "DEADLINE": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "NODE_FAIL": JobState.NODE_FAILURE,
}
ATTEMPT_KEY = "portal_attempt"
RESTARTS_KEY = "portal_restarts"  # Slurm's restart count when the portal released the job
HOLD_KEY = "portal_hold"  # 1: the portal requeued and held the job (a preemption), it releases it
TERM_KEY = "portal_term"  # requeue | end: the portal preempted it with a grace period (signalled)
PORTAL_KEYS = (ATTEMPT_KEY, RESTARTS_KEY, HOLD_KEY, TERM_KEY)
WAIT_FOR_PORTAL = "--begin=now+2600weeks"  # sbatch's way of saying "not before the portal starts it"
NOTE_SEPARATOR = " | "  # AdminComment: "<portal keys> | <sentence for people>"
ADMIN_COMMENT_LIMIT = 1000
NOTE_UPDATES_PER_PASS = 100  # scontrol calls for notes per pass; the rest follow in later passes
ENDED = frozenset({JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED, JobState.NODE_FAILURE})
# Words in a failed command's stderr that mean "the controller is not answering", not "bad request".
UNREACHABLE_MARKERS = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "zero bytes were transmitted",
    "communication connection failure",
    "slurm_persist_conn_open",
    "unexpected message received",
)


class SlurmCommandError(RuntimeError):
    """Slurm answered and refused the command (e.g. the job already ended)."""


@dataclass(frozen=True, slots=True)
class SlurmSettings:
    """What a cluster's ``backend_settings`` may say about its Slurm (all optional)."""

    slurm_conf: str | None = None  # path to slurm.conf; unset: Slurm's own default
    timeout_s: float = 10.0  # per CLI call
    gpu_type: str = "gpu"  # for nodes whose GRES is untyped (gpu:8 rather than gpu:a100:8)
    default_min_runtime_s: float | None = None  # when a job's comment has no min_runtime
    partition: str | None = None  # only observe jobs and nodes of this partition
    workdir: str = "/tmp"  # working directory of jobs the portal submits
    run_as: str | None = None  # a non-root Slurm account (AdminLevel=Admin) the commands run as
    mirror_timeout_s: float = 120.0  # per sacctmgr call of the account mirror (outside the pass)

    @classmethod
    def from_mapping(cls, settings: dict, *, gpu_type: str = "gpu") -> SlurmSettings:
        known = {name: settings[name] for name in cls.__slots__ if name in settings}
        return cls(**{"gpu_type": gpu_type, **known})


class SlurmCli:
    """Runs Slurm commands with a timeout and the configured SLURM_CONF."""

    def __init__(self, settings: SlurmSettings) -> None:
        self.timeout_s = settings.timeout_s
        self.env = {**os.environ, **({"SLURM_CONF": settings.slurm_conf} if settings.slurm_conf else {})}
        self.prefix = run_as_prefix(settings.run_as)

    def run(self, *args: str) -> str:
        try:
            done = subprocess.run(
                (*self.prefix, *args),
                capture_output=True, text=True, timeout=self.timeout_s, env=self.env, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as error:
            raise BackendUnavailable(f"{args[0]} did not answer within {self.timeout_s:g} s") from error
        except FileNotFoundError as error:
            raise BackendUnavailable(f"{args[0]} is not installed") from error
        if done.returncode != 0:
            raise _command_error(args, done.stderr.strip() or done.stdout.strip())
        return done.stdout


def current_account() -> str:
    """The account this process runs as."""
    return pwd.getpwuid(os.getuid()).pw_name


def run_as_prefix(user: str | None) -> tuple[str, ...]:
    """Commands run as ``user``: directly when the portal already is that user, else through
    runuser (the portal then runs as root and drops to the operator account for every Slurm call)."""
    if not user or user == current_account():
        return ()
    return ("runuser", "-u", user, "--")


def _command_error(args: tuple[str, ...], message: str) -> Exception:
    text = f"{' '.join(args[:3])}: {message}"
    if any(marker in message.lower() for marker in UNREACHABLE_MARKERS):
        return BackendUnavailable(text)
    return SlurmCommandError(text)


class SlurmBackend:
    """observe / apply / submit against one Slurm cluster (see the module docstring)."""

    name = "Slurm"

    def __init__(self, settings: SlurmSettings | None = None, *, cli: SlurmCli | None = None) -> None:
        self.settings = settings or SlurmSettings()
        self.cli = cli or SlurmCli(self.settings)
        self.operator = self.settings.run_as or current_account()  # the account the portal submits as
        self._account_paths: dict[str, str] = {}

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> SlurmBackend:
        return cls(SlurmSettings.from_mapping(cluster.backend_settings or {}, gpu_type=cluster.gpu_type))

    # -- reading ---------------------------------------------------------------------------------

    # 22.05's --json ignores squeue's and sinfo's filters (-p, -j, -t): we filter here.

    def nodes(self) -> tuple[SlurmNode, ...]:
        nodes = _parsed(parse_sinfo, self.cli.run("sinfo", "--json"))
        partition = self.settings.partition
        return tuple(node for node in nodes if not partition or partition in node.partitions)

    def jobs(self) -> tuple[SlurmJob, ...]:
        """Pending, running and recently ended jobs (ended ones stay for slurm.conf's MinJobAge);
        an array's tasks one by one."""
        return self.read_jobs()[0]

    def read_jobs(self) -> tuple[tuple[SlurmJob, ...], tuple[UnreadableJob, ...]]:
        """(jobs, records that could not be read): one odd record never hides the others."""
        jobs, unreadable = _parsed(read_squeue, self.cli.run("squeue", "--json", "-a", "-t", "all"))
        partition = self.settings.partition
        kept = tuple(job for job in jobs if not partition or job.partition == partition)
        return kept, tuple(UnreadableJob(ref=ref, error=error) for ref, error in unreadable)

    def runs(self, *, since: float) -> tuple[SlurmRun, ...]:
        """Accounting rows (one per run, requeues included) of jobs active since ``since``."""
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        return _parsed(parse_sacct, self.cli.run("sacct", "--json", "-X", "-D", "-S", start))

    def observe(self) -> ClusterState:
        nodes = tuple(self.observed_node(node) for node in self.nodes())
        jobs, unreadable = self.read_jobs()
        self._learn_shortened_accounts(jobs)
        observed, failed = [], list(unreadable)
        for job in jobs:
            if not job.gpus:
                continue  # CPU-only work is not the portal's: Slurm schedules it (job_submit.lua)
            try:
                observed.append(self.observed_job(job))
            except (KeyError, TypeError, ValueError) as error:
                failed.append(UnreadableJob(ref=job.ref, error=f"{type(error).__name__}: {error}"))
        return ClusterState(
            observed_at=time.time(), nodes=nodes, jobs=tuple(observed), unreadable=tuple(failed)
        )

    def observed_node(self, node: SlurmNode) -> ObservedNode:
        return ObservedNode(
            name=node.name,
            gpus=node.gpus,
            gpu_type=node.gpu_type or self.settings.gpu_type,
            healthy=node.healthy,
            reason=node.health_reason,
        )

    def observed_job(self, job: SlurmJob) -> ObservedJob:
        state = observed_state(job)
        ran = state is JobState.RUNNING or (state in ENDED and bool(job.nodes))
        keys = parse_comment(job.comment)
        ours = self.submitted_by_portal(job)
        workload = keys.get("workload", "") if ours else ""
        return ObservedJob(
            ref=job.ref,
            state=state,
            workload_id=int(workload) if workload.isdigit() else None,
            attempt=attempt(job),
            nodes=expand_hostlist(job.nodes or job.required_nodes) if ran else (),
            started_at=job.started_at if ran and job.state != "PENDING" else None,
            ended_at=job.ended_at if state in ENDED else None,
            account=path_for_account(job.account, self._account_paths),
            user=(keys.get("user") if ours else None) or job.user,
            gpus=job.gpus,
            gpus_per_node=job.gpus_per_node or (job.gpus // job.node_count if job.node_count > 1 else None),
            min_runtime_s=self.min_runtime_s(keys),
            resumable=self.resumable(job, keys),
            name=job.name,
            submitted_at=job.submitted_at,
            max_runtime_s=job.time_limit_s,
            held_by=held_by(job) if state is JobState.WAITING else "",
            checkpoint_interval_s=checkpoint_interval(keys),
        )

    def submitted_by_portal(self, job: SlurmJob) -> bool:
        """Only a job the portal's own Slurm account submitted speaks for the portal: its comment's
        ``workload=`` and ``user=`` are believed. Anyone can write `--comment=workload=7,user=alice`
        on their own sbatch; on such a job both are ignored (it is adopted as the Slurm user's)."""
        return job.user == self.operator

    def min_runtime_s(self, keys: dict[str, str]) -> float | None:
        """`min_runtime=2h` in the job's comment, else the cluster default."""
        declared = parse_duration(keys.get("min_runtime", ""))
        return declared if declared is not None else self.settings.default_min_runtime_s

    @staticmethod
    def resumable(job: SlurmJob, keys: dict[str, str]) -> bool:
        """`resumable=yes|no` in the comment, else the job's --requeue flag (slurm.conf JobRequeue)."""
        declared = parse_bool(keys.get("resumable", ""))
        return declared if declared is not None else job.requeue

    def _learn_shortened_accounts(self, jobs: tuple[SlurmJob, ...]) -> None:
        unknown = {job.account for job in jobs if is_shortened(job.account)} - set(self._account_paths)
        if not unknown:
            return
        listing = self.cli.run("sacctmgr", "-n", "-P", "show", "account", "format=account,description")
        for line in listing.splitlines():
            name, _, description = line.partition("|")
            self._account_paths[name] = description

    # -- writing ---------------------------------------------------------------------------------

    def apply(self, actions: list[Action]) -> None:
        """Push actions in order; each checks the job's current state first (idempotent)."""
        if not actions:
            return
        current = {job.ref: job for job in self.jobs()}
        refused: dict[int, str] = {}
        for action in actions:
            job = current.get(action.ref)
            if job is None:
                logger.warning("Slurm job %s is gone; skipping %s", action.ref, type(action).__name__)
                continue
            try:
                self._apply_one(action, job)
            except SlurmCommandError as error:
                logger.warning("Slurm refused %s on job %s: %s", type(action).__name__, action.ref, error)
                refused[action.workload_id] = f"Slurm refused job {action.ref}: {error}"
        if refused:
            raise ActionsRefused(refused)

    def _apply_one(self, action: Action, job: SlurmJob) -> None:
        state = observed_state(job)
        if state in ENDED:
            return
        if isinstance(action, StartAction):
            if state is JobState.WAITING:
                self.start(job, action.placement, attempt=action.attempt)
        elif isinstance(action, PreemptAction) and action.grace_s > 0:
            if state is JobState.RUNNING:
                self.signal(job, action)
        elif isinstance(action, PreemptAction) and action.requeue:
            if state is JobState.RUNNING:
                self.requeue_hold(job, note=action.reason)
        elif isinstance(action, PreemptAction):
            self.end(job, note=action.reason)
        elif isinstance(action, CancelAction):
            self.cli.run("scancel", job.ref)

    def requeue_hold(self, job: SlurmJob, *, note: str) -> None:
        """Back to waiting for the portal, same job id; the hold reads as the portal's own."""
        marks = {**portal_marks(job), HOLD_KEY: "1"}  # first: the hold must read as ours
        self.cli.run("scontrol", "update", f"JobId={job.ref}", admin_comment(marks, note=note))
        self.cli.run("scontrol", "requeuehold", job.ref)

    def end(self, job: SlurmJob, *, note: str) -> None:
        """Cancel a preempted job that is not resumable (Slurm: SIGTERM, SIGKILL after KillWait)."""
        said = f"preempted by the GPU portal: {note or 'its GPUs were given to other work'}"
        self.cli.run("scontrol", "update", f"JobId={job.ref}", admin_comment(portal_marks(job), note=said))
        self.cli.run("scancel", job.ref)

    def signal(self, job: SlurmJob, action: PreemptAction) -> None:
        """The first step of a preemption with a grace period: mark the job (``portal_term``, so it
        reads as already waiting, or ended, while it winds down) and send SIGTERM to the batch
        shell and every step; ``finish_preemptions`` stops it once the grace has passed."""
        marks = {**portal_marks(job), TERM_KEY: "requeue" if action.requeue else "end"}
        if action.requeue:
            marks[HOLD_KEY] = "1"
        grace = f"{action.reason} (SIGTERM sent; stopped after {action.grace_s} s)".strip()
        self.cli.run("scontrol", "update", f"JobId={job.ref}", admin_comment(marks, note=grace))
        self.cli.run("scancel", "--signal=TERM", "--full", job.ref)

    def finish_preemptions(self, actions: list[PreemptAction]) -> None:
        """The second step: requeue-and-hold (resumable) or cancel each job signalled by ``signal``
        once its grace has passed. A requeued job that already left (it exited on SIGTERM) is
        requeued all the same (Slurm requeues a finished batch job it still knows); a job Slurm no
        longer reports, or already back to waiting, is left alone. Idempotent."""
        current = {job.ref: job for job in self.jobs()}
        refused: dict[int, str] = {}
        for action in actions:
            job = current.get(action.ref)
            if job is None:
                continue
            try:
                if action.requeue and JOB_STATES.get(job.state) in ENDED:
                    # it exited on SIGTERM: Slurm updates no finished job, but requeues it, and the
                    # marks ``signal`` wrote (the hold reads as ours) are still on it
                    self.cli.run("scontrol", "requeuehold", job.ref)
                elif action.requeue and not (job.held and JOB_STATES.get(job.state) is JobState.WAITING):
                    self.requeue_hold(job, note=action.reason)
                elif not action.requeue and JOB_STATES.get(job.state, JobState.WAITING) not in ENDED:
                    self.end(job, note=action.reason)
            except SlurmCommandError as error:
                logger.warning("Slurm refused to finish the preemption of job %s: %s", action.ref, error)
                refused[action.workload_id] = f"Slurm refused job {action.ref}: {error}"
        if refused:
            raise ActionsRefused(refused)

    def start(self, job: SlurmJob, placement: tuple[tuple[str, int], ...], *, attempt: int) -> None:
        """Pin the job to the placement's nodes, make it eligible now, mark the attempt; a job the
        portal requeued and held is released. A hold someone else set is refused, never released."""
        if job.held and not portal_held(job):
            raise SlurmCommandError(
                f"job {job.ref} is held by {held_by(job)}; the portal does not release it"
            )
        if portal_marks(job).get(TERM_KEY) and JOB_STATES.get(job.state) is JobState.RUNNING:
            raise SlurmCommandError(f"job {job.ref} is still stopping (its preemption's grace period)")
        nodes = sorted(node for node, _gpus in placement)
        update = ["scontrol", "update", f"JobId={job.ref}", f"NodeList={','.join(nodes)}", "StartTime=now"]
        marks = {ATTEMPT_KEY: str(attempt), RESTARTS_KEY: str(job.restarts)}
        update.append(admin_comment(marks, note="started by the GPU portal"))
        if len(nodes) != job.node_count:
            update.append(f"NumNodes={len(nodes)}")
        if self.resumable(job, parse_comment(job.comment)) and not job.requeue:
            update.append("Requeue=1")  # the comment says resumable: let requeuehold work on it
        self.cli.run(*update)
        if job.held:
            self.cli.run("scontrol", "release", job.ref)

    def annotate(self, notes: dict[str, str]) -> int:
        """Write each waiting job's note (the portal's pending reason) after its AdminComment keys,
        where `scontrol show job` and `sacct -o AdminComment` show it; only notes that differ from
        what the job already says are written, in the notes' order (queue position), at most
        NOTE_UPDATES_PER_PASS. Tasks of an array not yet split off share one record, so they are
        left alone (one update would touch every task). Returns how many jobs were written."""
        jobs = {job.ref: job for job in self.jobs() if not job.array_job_id}
        written = 0
        for ref, wanted in notes.items():
            job, note = jobs.get(ref), wanted[: ADMIN_COMMENT_LIMIT - 100]
            if job is None or observed_state(job) is not JobState.WAITING:
                continue
            if job.admin_comment.partition(NOTE_SEPARATOR)[2] == note:
                continue
            try:
                self.cli.run(
                    "scontrol", "update", f"JobId={ref}", admin_comment(portal_marks(job), note=note)
                )
            except SlurmCommandError as error:  # ended meanwhile: the next pass sees it
                logger.info("no note on Slurm job %s: %s", ref, error)
                continue
            written += 1
            if written >= NOTE_UPDATES_PER_PASS:
                break
        return written

    def submit(self, request: SubmitRequest) -> str:
        """sbatch a held job for a workload submitted through the portal's API; returns the job id."""
        output = self.cli.run("sbatch", "--parsable", *self.sbatch_arguments(request))
        return output.strip().split(";")[0]

    def sbatch_arguments(self, request: SubmitRequest) -> list[str]:
        comment = (
            f"workload={request.workload_id},user={request.user},"
            f"min_runtime={int(request.min_runtime_s)}s,resumable={'yes' if request.resumable else 'no'}"
        )
        if request.checkpoint_interval_s:
            comment += f",checkpoint={int(request.checkpoint_interval_s)}s"
        arguments = [
            WAIT_FOR_PORTAL,  # as job_submit.lua does: a begin time only the portal moves to now
            f"--account={account_name(request.account)}",
            f"--job-name={request.name or f'workload-{request.workload_id}'}",
            f"--comment={comment}",
            "--requeue" if request.resumable else "--no-requeue",
            f"--chdir={request.metadata.get('workdir', self.settings.workdir)}",
            "--output=/dev/null",
        ]
        arguments += _gpu_arguments(request)
        if request.max_runtime_s:
            arguments.append(f"--time={max(1, round(request.max_runtime_s / 60))}")
        return [*arguments, f"--wrap={request.metadata.get('command', 'sleep infinity')}"]


def portal_marks(job: SlurmJob) -> dict[str, str]:
    """The portal's own keys in the job's AdminComment ("portal_attempt=2,portal_restarts=0 | ...")."""
    keys = parse_comment(job.admin_comment.partition(NOTE_SEPARATOR)[0])
    return {key: value for key, value in keys.items() if key in PORTAL_KEYS}


def admin_comment(marks: dict[str, str], *, note: str = "") -> str:
    """The AdminComment= argument: the portal's keys, then a sentence for people reading squeue."""
    keys = ",".join(f"{key}={marks[key]}" for key in PORTAL_KEYS if key in marks)
    text = f"{keys}{NOTE_SEPARATOR}{note}" if note else keys
    return f"AdminComment={text[:ADMIN_COMMENT_LIMIT]}"


def portal_held(job: SlurmJob) -> bool:
    """Held by the portal itself (a preemption's requeue-and-hold), not by a user or an admin."""
    return portal_marks(job).get(HOLD_KEY) == "1"


def held_by(job: SlurmJob) -> str:
    """Who holds a job the portal did not hold: its user (`scontrol hold` as them) or an admin."""
    if not job.held or portal_held(job):
        return ""
    return job.user or "a user" if job.reason == "JobHeldUser" else "a Slurm administrator"


def portal_attempt(job: SlurmJob) -> int | None:
    value = portal_marks(job).get(ATTEMPT_KEY, "")
    return int(value) if value.isdigit() else None


def attempt(job: SlurmJob) -> int:
    """The portal's attempt number of the job's current or last run (1 for the first start).

    It is the one the portal wrote when it released the job; a job it never started counts the
    runs Slurm has made (restart count + 1).
    """
    written = portal_attempt(job)
    return written if written is not None else job.restarts + 1


def released_by_portal(job: SlurmJob) -> bool:
    """Released by the portal and not requeued since (Slurm requeues a --requeue job on a node
    failure without holding it; such a job waits for the portal again)."""
    keys = portal_marks(job)
    restarts = keys.get(RESTARTS_KEY, "")
    return ATTEMPT_KEY in keys and (not restarts.isdigit() or int(restarts) >= job.restarts)


def observed_state(job: SlurmJob) -> JobState:
    """Slurm's job state in the portal's words. A job the portal released that Slurm has not
    started yet (its pinned nodes are still being freed) is admitted: it counts as running there.
    A requeued-and-held job still COMPLETING (its processes being killed) is already waiting; so is
    one the portal preempted with a grace period (``portal_term=requeue``) while it winds down or
    once it exited on the signal (not one somebody cancelled meanwhile), and
    one marked ``portal_term=end`` has ended (the portal already recorded the preemption)."""
    if job.state == "COMPLETING" and job.held:
        return JobState.WAITING
    state = JOB_STATES.get(job.state, JobState.WAITING)
    term = portal_marks(job).get(TERM_KEY, "")
    if term == "requeue" and job.state != "CANCELLED":  # preempted with a grace period: waiting
        return JobState.WAITING  # for the portal from the signal on (unless someone cancelled it)
    if term == "end" and state not in ENDED:  # ... or, not resumable, ended from the signal on
        return JobState.CANCELLED
    if state is JobState.WAITING and not job.held and released_by_portal(job) and not portal_held(job):
        return JobState.RUNNING
    return state


def _parsed(parse: Callable[[str], T], text: str) -> T:
    try:
        return parse(text)
    except SlurmReportedError as error:
        raise BackendUnavailable(str(error)) from error


def _gpu_arguments(request: SubmitRequest) -> list[str]:
    if request.gpus_per_node and request.gpus > request.gpus_per_node:
        return [f"--nodes={request.gpus // request.gpus_per_node}", f"--gres=gpu:{request.gpus_per_node}"]
    return ["--nodes=1", f"--gres=gpu:{request.gpus}"]
