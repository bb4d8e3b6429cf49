"""The simulator: the real scheduling policy replayed on a virtual clock (DESIGN 1, 5, 8).

``run_simulation(inputs, policy="fairshare")`` is the whole API: the management command, the
benchmark and (later) the portal's what-if panel call it with a :class:`SimulationInput` built by
the Ai2-like scenario generator, read from CSV traces, or assembled from recorded workloads.
It needs no database.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from scheduling.policy import PolicyConfig
from scheduling.policy.types import GOODPUT
from scheduling.simulator.engine import DEFAULT_RESUBMIT_DELAY_S, Engine, Planner, Progress
from scheduling.simulator.model import NodeOutage, SimJob, SimulationError, SimulationInput
from scheduling.simulator.result import SimulationResult, summarize

# The worlds to compare. "fairshare": the policy as the live pass runs it, with issue 17's rules
# (``GOODPUT``: victims that lose the least work, no ending of funded work for rebalancing, the
# lane for short work). "priority" is the scheduler being replaced: static classes that
# everyone sets high, first come first served inside a class, no contract (nothing protected),
# preemption only by a higher class, no reservations for large jobs. "fifo": submit order only,
# greedy (whatever fits starts). "easy": first come first served with EASY backfill: the first
# job that cannot start reserves the nodes that free first, by the running work's declared
# maximum runtimes, and later work uses them only if its own declared maximum runtime ends by
# then; no preemption. "slurm": a Slurm site out of the box: Fair Tree priority over the same
# budget tree and usage as "fairshare", the same EASY backfill, no preemption, nothing protected.
POLICIES: dict[str, PolicyConfig] = {
    "fairshare": dataclasses.replace(PolicyConfig(ordering="fairshare"), **GOODPUT),
    "priority": PolicyConfig(ordering="priority", contract=False, reservation=False, backfill=False),
    "fifo": PolicyConfig(
        ordering="fifo", contract=False, preemption=False, reservation=False, backfill=False
    ),
    "easy": PolicyConfig(ordering="fifo", contract=False, preemption=False, backfill_by="max_runtime"),
    "slurm": PolicyConfig(ordering="fairshare", contract=False, preemption=False, backfill_by="max_runtime"),
}

__all__ = [
    "POLICIES",
    "NodeOutage",
    "SimJob",
    "SimulationError",
    "SimulationInput",
    "SimulationResult",
    "policy_config",
    "run_simulation",
]


def policy_config(policy: str, **overrides: Any) -> PolicyConfig:
    """The configuration of a named policy, with fields overridden (e.g. ``window_s``): any of
    PolicyConfig's fields, with its types (``dataclasses.replace`` checks the names)."""
    if policy not in POLICIES:
        raise SimulationError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    return dataclasses.replace(POLICIES[policy], **overrides)


def run_simulation(
    inputs: SimulationInput,
    *,
    policy: str = "fairshare",
    config: PolicyConfig | None = None,
    planner: Planner | None = None,
    pass_interval_s: float = 10.0,
    progress: Progress | None = None,
    resubmit_delay_s: float | None = DEFAULT_RESUBMIT_DELAY_S,
) -> SimulationResult:
    """Replay ``inputs`` under ``policy`` (or an explicit ``config``) and measure it.

    ``planner`` defaults to the real policy (``plan`` with ``explain=False``: the same decisions,
    without the pending reasons nobody reads here), fed the pending queue the engine keeps grouped;
    tests may pass a stand-in called as ``planner(snapshot, now, config)``.

    ``resubmit_delay_s``: a non-resumable workload ended by a preemption or a node failure is
    submitted again by its owner that long after, with its full duration; ``None``: it stays ended.
    """
    began = time.perf_counter()
    engine = Engine(
        inputs,
        config or policy_config(policy),
        planner,
        pass_interval_s=pass_interval_s,
        progress=progress,
        resubmit_delay_s=resubmit_delay_s,
    )
    engine.run()
    return summarize(engine, policy, time.perf_counter() - began)
