"""The scheduler's policy: pure Python, no Django, no clock.

Dataclasses in (``Snapshot``), decisions out (``Plan``). The live pass, the simulator and the
what-if previews all call :func:`plan`, so a simulation is the real scheduler on a fake clock.
"""

from scheduling.policy.options import StartOption, start_options
from scheduling.policy.planner import plan
from scheduling.policy.session import PlanningSession
from scheduling.policy.types import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingReason,
    PendingWorkload,
    Plan,
    PolicyConfig,
    Preemption,
    ReasonCode,
    Reservation,
    RunningWorkload,
    Snapshot,
    Start,
)
from scheduling.policy.usage import decayed_usage, usage_in_window

__all__ = [
    "BudgetNodeSpec",
    "ClusterNodeSpec",
    "PendingReason",
    "PendingWorkload",
    "PlanningSession",
    "Plan",
    "PolicyConfig",
    "Preemption",
    "ReasonCode",
    "Reservation",
    "RunningWorkload",
    "Snapshot",
    "Start",
    "StartOption",
    "decayed_usage",
    "plan",
    "start_options",
    "usage_in_window",
]
