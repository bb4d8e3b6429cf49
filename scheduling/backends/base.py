"""The one small interface every backend implements (DESIGN 7).

``observe()`` reads what the cluster says is true: nodes with health, and jobs with their states.
``apply()`` pushes decisions. Applying the same action twice is harmless: an adapter checks the
job's current state and does nothing when it is already there (idempotent by workload + attempt).
External output (squeue JSON, Kubernetes objects, simulator rows) is parsed into these plain classes
at the edge; nothing else in the codebase sees a backend's own format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable


class BackendUnavailable(RuntimeError):
    """The backend did not answer; the pass records BACKEND_UNAVAILABLE and changes nothing."""


class ActionsRefused(RuntimeError):
    """The backend answered but refused some actions; every other action was applied.

    ``refused``: workload id -> the backend's words. Dispatch records only the accepted actions'
    effects and tells the people concerned (``scheduling.dispatch``)."""

    def __init__(self, refused: dict[int, str]) -> None:
        super().__init__("; ".join(f"workload {wid}: {why}" for wid, why in sorted(refused.items())))
        self.refused = dict(refused)


class JobState(StrEnum):
    WAITING = "waiting"  # known to the backend, not started (held / suspended / queued for the portal)
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NODE_FAILURE = "node_failure"


@dataclass(frozen=True, slots=True)
class ObservedNode:
    name: str
    gpus: int
    gpu_type: str
    domain: str = "default"
    healthy: bool = True
    reason: str = ""  # why it is unhealthy, as the backend says it (e.g. "DRAIN: bad GPU")


@dataclass(frozen=True, slots=True)
class ObservedJob:
    """One job as the backend sees it. ``workload_id`` is set when the portal created or adopted it."""

    ref: str  # the backend's own id (Slurm job id, Kubernetes namespace/name, simulator id)
    state: JobState
    workload_id: int | None = None
    attempt: int = 0
    nodes: tuple[str, ...] = ()
    started_at: float | None = None
    ended_at: float | None = None
    # Fields a natively submitted job brings with it, for adoption as a workload:
    account: str = ""  # allocation path or its backend name
    user: str = ""
    gpus: int = 0
    gpus_per_node: int | None = None
    min_runtime_s: float | None = None
    resumable: bool | None = None
    name: str = ""
    gpu_utilisation: float | None = None  # mean busy % since the last observation, when reported
    submitted_at: float | None = None  # when the user submitted it (an array's tasks share it)
    max_runtime_s: float | None = None  # the declared limit (Slurm --time, activeDeadlineSeconds)
    held_by: str = ""  # a hold the portal did not set (a user's `scontrol hold`): who holds it
    checkpoint_interval_s: float | None = None  # declared: it saves its progress this often


@dataclass(frozen=True, slots=True)
class UnreadableJob:
    """A job the backend reported but the adapter could not read; the pass skips it and says why."""

    ref: str
    error: str


@dataclass(frozen=True, slots=True)
class ClusterState:
    observed_at: float
    nodes: tuple[ObservedNode, ...]
    jobs: tuple[ObservedJob, ...]
    unreadable: tuple[UnreadableJob, ...] = ()


@dataclass(frozen=True, slots=True)
class StartAction:
    workload_id: int
    ref: str
    attempt: int
    placement: tuple[tuple[str, int], ...]  # ((node, GPUs), ...)


@dataclass(frozen=True, slots=True)
class PreemptAction:
    workload_id: int
    ref: str
    attempt: int
    requeue: bool  # True: back to waiting for the portal; False: end the job
    reason: str = ""  # why, in words the job's owner reads (the backend shows it where it can)
    grace_s: int = 0  # seconds between the termination signal and the kill or requeue (0: at once)


@dataclass(frozen=True, slots=True)
class CancelAction:
    workload_id: int
    ref: str


Action = StartAction | PreemptAction | CancelAction


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """A workload submitted through the portal's API, to be created in the backend (waiting)."""

    workload_id: int
    account: str
    user: str
    gpus: int
    gpus_per_node: int | None
    name: str
    min_runtime_s: float
    resumable: bool
    max_runtime_s: float | None = None
    metadata: dict = field(default_factory=dict)  # command / image, opaque to the portal
    checkpoint_interval_s: float | None = None  # declared: it saves its progress this often
    grace_s: int = 0  # the cluster's preemption grace, for backends that set it on the job itself


class Backend(Protocol):
    def observe(self) -> ClusterState:
        """Read nodes and jobs. Raises BackendUnavailable when the backend does not answer."""
        ...

    def apply(self, actions: list[Action]) -> None:
        """Push actions; idempotent. Raises BackendUnavailable when the backend does not answer, and
        ActionsRefused (after applying the others) when it refuses some of them."""
        ...

    def submit(self, request: SubmitRequest) -> str:
        """Create a waiting job for a workload submitted through the API; returns its ref."""
        ...


@runtime_checkable
class GracefulBackend(Protocol):
    """A backend whose preemption with a grace period is two steps: ``apply`` sends the job its
    termination signal (``PreemptAction.grace_s`` > 0) and leaves it running; once the grace has
    passed, ``finish_preemptions`` kills or requeues it (Slurm). Dispatch records when each is due
    and calls it from later passes until it succeeds. Backends that let the platform wait out the
    grace (Kubernetes' terminationGracePeriodSeconds) do not implement it."""

    def finish_preemptions(self, actions: list[PreemptAction]) -> None:
        """Kill or requeue each job signalled earlier; idempotent (a job already stopped is left
        alone). Raises ActionsRefused (after finishing the others) for those it could not stop."""
        ...
