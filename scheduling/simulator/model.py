"""What a simulation reads: the cluster, the budget tree, the jobs and the node failures.

Everything here is plain, frozen data so the same input can be replayed under several policies
(and by the portal's what-if panel with edited budgets). Times are seconds on the simulator's
clock, which starts at 0; the measured period is ``[warmup_s, warmup_s + days * 86400]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec

WORKLOAD_CLASSES = ("debug", "interactive", "batch")


class SimulationError(RuntimeError):
    """The input cannot be simulated, or the policy returned a plan the cluster cannot apply."""


@dataclass(frozen=True, slots=True)
class SimJob:
    """One workload as it is submitted. ``duration_s`` is the work it needs at full speed.

    ``checkpoint_s`` is how often resumable work saves progress (0: continuously, nothing is lost
    on preemption). ``busy`` is the fraction of its GPU-time the workload really computes: an
    interactive session that sits idle half the time has ``busy=0.5`` (utilisation, DESIGN 8).
    ``kind`` is the scenario's finer label (debug, batch, sweep, interactive, unfunded) used
    only for reporting; the policy sees ``workload_class``. ``patience_s`` cancels work that has
    not started that long after submit (opportunistic work nobody waits for forever).
    """

    id: int
    allocation: str
    user: str
    gpus: int
    submit_s: float
    duration_s: float
    workload_class: str = "batch"
    min_runtime_s: float = 0.0
    resumable: bool = False
    max_runtime_s: float | None = None
    gpus_per_node: int | None = None
    priority: int = 0
    checkpoint_s: float = 0.0
    busy: float = 1.0
    kind: str = ""
    patience_s: float | None = None
    ref: str = ""
    gpu_type: str | None = None  # the GPU type it needs (None: any)


@dataclass(frozen=True, slots=True)
class NodeOutage:
    """A node fails at ``at_s`` and is healthy again ``repair_s`` later."""

    node: str
    at_s: float
    repair_s: float


@dataclass(frozen=True, slots=True)
class SimulationInput:
    """A complete, replayable description of a simulated month (or any period)."""

    name: str
    cluster_nodes: tuple[ClusterNodeSpec, ...]
    tree: tuple[BudgetNodeSpec, ...]
    jobs: tuple[SimJob, ...]
    days: float
    warmup_s: float = 0.0
    outages: tuple[NodeOutage, ...] = ()
    parameters: dict[str, object] = field(default_factory=dict)
    # how reading a trace adjusted it, per kind (traces.ADJUSTMENTS); None: not read from a trace
    trace_adjustments: dict[str, int] | None = None

    @property
    def horizon_s(self) -> float:
        return self.warmup_s + self.days * 86400.0

    @property
    def gpus(self) -> int:
        return sum(node.gpus for node in self.cluster_nodes)
