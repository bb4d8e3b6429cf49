"""Snapshot and plan types: the whole contract between the policy and its callers.

Times are plain floats in seconds since the epoch (or since the simulator's start): the policy
never reads a clock, ``now`` is passed in. GPU counts are ints; budgets are floats in GPUs.
Every collection is a tuple or a read-only mapping so a snapshot can be shared and replayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal

WorkloadId = int
AllocationPath = str  # slug path of a budget node, e.g. "ai2/nlp/olmo"
Placement = tuple[tuple[str, int], ...]  # ((node name, GPUs on it), ...), sorted by node name

_EMPTY: Mapping = MappingProxyType({})


class ReasonCode(StrEnum):
    """Pending reason codes (DESIGN 6)."""

    FAIR_SHARE_QUEUED = "FAIR_SHARE_QUEUED"
    WAITING_FOR_GPUS = "WAITING_FOR_GPUS"
    FRAGMENTED = "FRAGMENTED"
    PROTECTED_WORK = "PROTECTED_WORK"
    RESERVED_FOR_LARGER_JOB = "RESERVED_FOR_LARGER_JOB"
    UNFUNDED = "UNFUNDED"
    OVER_LIMIT = "OVER_LIMIT"
    HELD = "HELD"
    BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
    NO_MATCHING_NODES = "NO_MATCHING_NODES"


@dataclass(frozen=True, slots=True)
class BudgetNodeSpec:
    """One budget node with its budget on this cluster (GPUs; 0 means it funds nothing here)."""

    path: AllocationPath
    parent: AllocationPath | None
    budget: float
    concurrency_limit: int | None = None  # max GPUs running at once for the subtree (OVER_LIMIT)


@dataclass(frozen=True, slots=True)
class ClusterNodeSpec:
    """A machine with ``gpus`` GPUs of one type in a topology domain."""

    name: str
    gpus: int
    gpu_type: str
    domain: str = "default"
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    id: WorkloadId
    allocation: AllocationPath
    user: str
    gpus: int
    placement: Placement
    started_at: float
    protected_until: float  # == started_at for unfunded or min-runtime-0 work
    resumable: bool
    funded: bool
    workload_class: str = "batch"
    expected_end: float | None = None  # started_at + declared max runtime, when declared
    submitted_at: float = 0.0
    priority: int = 0  # only read by the "priority" ordering: a strictly higher class may preempt it
    checkpoint_interval_s: float | None = None  # resumable work saves its progress this often
    idle: bool = False  # an interactive session busy under 10% over the last 30 minutes


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    id: WorkloadId
    allocation: AllocationPath
    user: str
    gpus: int
    submitted_at: float
    gpus_per_node: int | None = None  # None: the policy decides (one node when it fits, else whole nodes)
    gpu_type: str | None = None  # None: any type
    workload_class: str = "batch"  # debug | interactive | batch
    min_runtime_s: float = 0.0
    resumable: bool = False
    max_runtime_s: float | None = None  # declared maximum runtime, used for backfill and estimates
    held: bool = False
    held_by: str = ""
    held_at: float | None = None
    held_note: str = ""
    priority: int = 0  # only read by the "priority" ordering (the old world, for the simulator)
    checkpoint_interval_s: float | None = None  # resumable work saves its progress this often


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One consistent read of a cluster for one pass.

    ``usage`` is each allocation's *own* effective usage in GPU-seconds (windowed or decayed by the
    caller, running work included up to ``now``); the ranking rolls it up the tree.
    ``user_usage`` is the same per (allocation, user), for the user level inside an allocation.
    """

    cluster: str
    tree: tuple[BudgetNodeSpec, ...]
    nodes: tuple[ClusterNodeSpec, ...]
    running: tuple[RunningWorkload, ...] = ()
    pending: tuple[PendingWorkload, ...] = ()
    usage: Mapping[AllocationPath, float] = field(default_factory=lambda: _EMPTY)
    user_usage: Mapping[tuple[AllocationPath, str], float] = field(default_factory=lambda: _EMPTY)
    backend_available: bool = True
    backend_name: str = "backend"
    backend_error_at: float | None = None


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    ordering: Literal["fairshare", "priority", "fifo"] = "fairshare"
    window_s: float = 7 * 86400.0
    half_life_s: float | None = None  # set: usage decays with this half-life instead of a hard window
    min_runtime_cap_s: float = 8 * 3600.0
    projected_charge_s: float = 3600.0  # GPU-seconds per admitted GPU charged within the pass
    preemption: bool = True
    contract: bool = True  # False: nothing is protected (the "priority"/"fifo" worlds)
    reservation: bool = True
    backfill: bool = True
    settle: bool = True  # re-walk until nothing changes, so re-planning the result preempts nothing
    # What lets work use reserved nodes (rules.may_backfill): "release", the drain rule (work that
    # can be preempted in time, or ends in time); "max_runtime", EASY: only work whose declared
    # maximum runtime ends by the reserved start (for worlds without preemption: "easy", "slurm").
    backfill_by: Literal["release", "max_runtime"] = "release"
    # Preemption that weighs the work it throws away, and the lane for short work (DESIGN 5.5,
    # 5.7). Off in a bare PolicyConfig, which plans as before them; ``GOODPUT`` turns them on.
    goodput_victims: bool = False  # victims lose the least work: idle sessions, then since checkpoint
    end_work_margin: float = 0.0  # ending funded work needs the preemptor at most (1 - this) of its share
    rebalance_hysteresis: float = 0.0  # a funded victim's ratio must exceed the preemptor's x (1 + this)
    max_loss_per_gpu_s: float | None = None  # resumable victims: at most this long since checkpoint
    drain_release: bool = True  # reservations expect funded work back when its protection ends
    short_lane_fraction: float = 0.0  # GPUs kept free for short work, as a fraction of healthy GPUs
    short_max_runtime_s: float = 1800.0  # short work: debug or interactive, or a declared runtime this short
    short_max_gpus: int = 2  # ... on at most this many GPUs


# The rules of issue 17 as the live pass and the simulator's "fairshare" run them (PolicyConfig
# leaves them off, so that a bare config plans as before them); the values are measured in
# docs/simulator.md ("Outcomes on real traces").
GOODPUT: Mapping[str, Any] = {
    "goodput_victims": True,
    "end_work_margin": 1.0,  # funded work that is not resumable ends only for an unused allocation
    "rebalance_hysteresis": 0.25,
    "max_loss_per_gpu_s": 180.0,  # resumable victims: at most 3 minutes of work since their checkpoint
    "short_lane_fraction": 0.01,
    "drain_release": False,  # funded work is no longer sure to be preempted when protection ends
}


@dataclass(frozen=True, slots=True)
class Start:
    workload_id: WorkloadId
    placement: Placement
    protected_until: float
    funded: bool


@dataclass(frozen=True, slots=True)
class Preemption:
    workload_id: WorkloadId
    requeue: bool  # resumable victims go back to pending; the others end
    preemptor_id: WorkloadId
    reason: str


@dataclass(frozen=True, slots=True)
class Reservation:
    workload_id: WorkloadId
    nodes: tuple[str, ...]
    start_at: float | None


@dataclass(frozen=True, slots=True)
class PendingReason:
    workload_id: WorkloadId
    code: ReasonCode
    params: Mapping[str, object]
    message: str
    position: int  # 1-based place in the cluster's scheduling order among pending workloads
    estimated_start: float | None  # None: unknown


@dataclass(frozen=True, slots=True)
class Plan:
    starts: tuple[Start, ...]
    preemptions: tuple[Preemption, ...]
    reservations: tuple[Reservation, ...]
    reasons: Sequence[PendingReason]  # a reasons.Reasons: objects made when read
    fair_share: Mapping[AllocationPath, float]  # fair-share ratio (usage share / budget share) now
    timings_ms: Mapping[str, float]  # per phase, ms: rank, index, admit, preempt, reserve, explain
