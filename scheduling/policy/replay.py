"""Apply a plan to the snapshot it came from: what the next pass would see if nothing else changed.

Used by the benchmark (a steady-state pass after a first one) and by the tests of the no-flip-flop
invariant. Usage is left as it was: at the same ``now`` no more GPU-seconds have been spent.
"""

from __future__ import annotations

from dataclasses import replace

from scheduling.policy.types import PendingWorkload, Placement, Plan, RunningWorkload, Snapshot


def after_plan(snapshot: Snapshot, result: Plan, now: float) -> Snapshot:
    """Starts become running work, victims leave (resumable ones go back to pending)."""
    starting = {start.workload_id: start for start in result.starts}
    victims = {preemption.workload_id: preemption for preemption in result.preemptions}
    running = [workload for workload in snapshot.running if workload.id not in victims]
    pending = []
    types = {node.name: node.gpu_type for node in snapshot.nodes}
    requeued = [
        as_pending(w, single_type(w, types))
        for w in snapshot.running
        if w.id in victims and victims[w.id].requeue
    ]
    for workload in (*snapshot.pending, *requeued):
        start = starting.get(workload.id)
        if start is None:
            pending.append(workload)
        else:  # a requeued victim may restart in the same pass (a move)
            running.append(as_running(workload, start.placement, start.protected_until, start.funded, now))
    pending.sort(key=lambda workload: (workload.submitted_at, workload.id))
    return replace(snapshot, running=tuple(running), pending=tuple(pending))


def as_running(
    workload: PendingWorkload, placement: Placement, protected_until: float, funded: bool, now: float
) -> RunningWorkload:
    """``workload`` as it runs once started at ``now`` on ``placement``."""
    runtime = workload.max_runtime_s
    return RunningWorkload(
        id=workload.id,
        allocation=workload.allocation,
        user=workload.user,
        gpus=workload.gpus,
        placement=placement,
        started_at=now,
        protected_until=protected_until,
        resumable=workload.resumable,
        funded=funded,
        workload_class=workload.workload_class,
        expected_end=None if runtime is None else now + runtime,
        submitted_at=workload.submitted_at,
        priority=workload.priority,
        checkpoint_interval_s=workload.checkpoint_interval_s,
    )


def single_type(workload: RunningWorkload, types: dict[str, str]) -> str | None:
    """The GPU type a workload ran on, when its nodes had one type (it resumes on the same kind)."""
    kinds = {types[name] for name, _ in workload.placement if name in types}
    return kinds.pop() if len(kinds) == 1 else None


def as_pending(workload: RunningWorkload, gpu_type: str | None = None) -> PendingWorkload:
    """A preempted resumable workload back in the queue, with its original submit time."""
    runtime = None if workload.expected_end is None else workload.expected_end - workload.started_at
    return PendingWorkload(
        id=workload.id,
        allocation=workload.allocation,
        user=workload.user,
        gpus=workload.gpus,
        submitted_at=workload.submitted_at,
        gpu_type=gpu_type,
        workload_class=workload.workload_class,
        min_runtime_s=max(0.0, workload.protected_until - workload.started_at),
        resumable=workload.resumable,
        max_runtime_s=runtime,
        priority=workload.priority,
        checkpoint_interval_s=workload.checkpoint_interval_s,
    )
