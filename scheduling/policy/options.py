"""What would start a pending workload sooner? Each option is decided by re-planning, not guessed.

``start_options`` tries variants of one pending workload against the same snapshot and the same
``plan()``: fewer GPUs (halving down to 1), minimum runtime 0 (fully preemptible, so it may backfill
reserved nodes), charged to no budget (unfunded: opportunistic, never protected), and every other
GPU type the cluster has. An option is returned when the variant starts in this pass, or has a
known estimated start earlier than the workload as it is.

Each variant is one ``plan_grouped`` of the whole snapshot, cut short only where that is exact:

- only the one workload's reason is explained (``explain=frozenset({id})``; it equals the full
  explanation's);
- a variant stops planning as soon as the workload starts: a start is never undone later in the
  same pass (only work running in the snapshot, and started before ``now``, may be preempted; a
  settling walk only adds starts), so the rest of the pass could not change the answer.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, replace
from typing import Any, cast

from scheduling.policy import planner
from scheduling.policy.grouping import Grouped, group_pending, swap_grouped
from scheduling.policy.reasons import Reasons, gpus_phrase
from scheduling.policy.session import PlanningSession
from scheduling.policy.types import (
    PendingWorkload,
    Plan,
    PolicyConfig,
    ReasonCode,
    Snapshot,
    WorkloadId,
)

UNFUNDED_ALLOCATION = "(unfunded)"
AS_IT_IS = "as it is"


@dataclass(frozen=True, slots=True)
class StartOption:
    label: str  # e.g. "with 4 GPUs", "with minimum runtime 0", "on A100"
    changes: dict[str, object]  # the PendingWorkload fields the option changes
    starts_now: bool
    estimated_start: float | None
    code: ReasonCode | None  # the reason it would still wait, when it does not start now


def start_options(
    snapshot: Snapshot, workload_id: WorkloadId, now: float, config: PolicyConfig
) -> tuple[StartOption, ...]:
    """Options that start ``workload_id`` sooner than as it is (empty if it starts anyway or is unknown)."""
    return decide_start_options(snapshot, workload_id, now, config)[1]


def decide_start_options(
    snapshot: Snapshot,
    workload_id: WorkloadId,
    now: float,
    config: PolicyConfig,
    *,
    as_planned: Plan | None = None,
    session: PlanningSession | None = None,
) -> tuple[StartOption | None, tuple[StartOption, ...]]:
    """(the workload as it is, the options that start it sooner), from one planning per variant.

    The first is what ``plan(snapshot)`` decides for the workload (labelled "as it is"), or None
    when it is not in the snapshot's queue or is held; the options are empty when it is None or
    starts now (as :func:`start_options`). ``as_planned``: ``plan(snapshot, now, config)`` with
    every reason, when the caller has it (one plan serves every workload of a snapshot): the
    workload as it is is then read from it instead of planned again. ``session``: the caller's
    planning session for this snapshot (None: one for these variants alone); every variant shares
    the snapshot's running work, nodes and tree, so each re-plan after the first files nothing anew."""
    workload = next((w for w in snapshot.pending if w.id == workload_id), None)
    if workload is None or workload.held:
        return None, ()
    session = session or PlanningSession()
    # Read the queue once; each variant swaps its one workload into copies of these.
    shared = (
        group_pending(snapshot.pending),
        [at for at, w in enumerate(snapshot.pending) if w.id == workload_id],
    )
    if as_planned is None:
        baseline = _decide(snapshot, shared, workload, AS_IT_IS, {}, now, config, session)
    else:
        baseline = _option(AS_IT_IS, {}, workload_id, as_planned)
    if baseline.starts_now:
        return baseline, ()
    options = (
        _decide(snapshot, shared, workload, label, changes, now, config, session)
        for label, changes in _variants(snapshot, workload)
    )
    return baseline, tuple(option for option in options if _sooner(option, baseline))


def _variants(snapshot: Snapshot, workload: PendingWorkload) -> list[tuple[str, dict[str, object]]]:
    variants: list[tuple[str, dict[str, object]]] = []
    gpus = workload.gpus // 2
    while gpus >= 1:
        per_node = (
            workload.gpus_per_node if workload.gpus_per_node and gpus % workload.gpus_per_node == 0 else None
        )
        variants.append((f"with {gpus_phrase(gpus)}", {"gpus": gpus, "gpus_per_node": per_node}))
        gpus //= 2
    if workload.min_runtime_s > 0:
        variants.append(("with minimum runtime 0", {"min_runtime_s": 0.0}))
    variants.append(("unfunded (opportunistic)", {"allocation": UNFUNDED_ALLOCATION, "min_runtime_s": 0.0}))
    for gpu_type in sorted({node.gpu_type for node in snapshot.nodes if node.healthy} - {workload.gpu_type}):
        variants.append((f"on {gpu_type}", {"gpu_type": gpu_type}))
    return variants


def _decide(
    snapshot: Snapshot,
    shared: tuple[Grouped, list[int]],
    workload: PendingWorkload,
    label: str,
    changes: dict,
    now: float,
    config: PolicyConfig,
    session: PlanningSession,
) -> StartOption:
    """Re-plan with ``workload`` changed. ``shared``: the snapshot's grouped queue and the places
    of ``workload`` in ``snapshot.pending``."""
    variant = replace(workload, **changes)
    grouped, places = shared
    pending = list(snapshot.pending)
    for at in places:
        pending[at] = variant
    variant_grouped = swap_grouped(grouped, workload, variant)
    result = _plan_until_started(
        replace(snapshot, pending=tuple(pending)), now, config, variant_grouped, workload.id, session
    )
    if result is None:
        return StartOption(label, changes, True, None, None)
    return _option(label, changes, workload.id, result)


class _Started(Exception):
    """The watched workload started: nothing later in the pass can undo that."""


class _UntilStarted(planner._Pass):
    """The planner's pass, stopped the moment ``watched`` starts (``_start`` is where every start,
    placed or by preemption, is recorded)."""

    watched: WorkloadId

    def _start(self, workload: PendingWorkload, *args: Any, **kwargs: Any) -> None:
        super()._start(workload, *args, **kwargs)
        if workload.id == self.watched:
            raise _Started


def _plan_until_started(
    snapshot: Snapshot,
    now: float,
    config: PolicyConfig,
    grouped: Grouped,
    watched: WorkloadId,
    session: PlanningSession,
) -> Plan | None:
    """``plan_grouped(..., explain=frozenset({watched}))``, or None as soon as ``watched`` starts."""
    if not snapshot.backend_available:
        return planner.plan_grouped(
            snapshot, now, config, grouped, session=session, explain=frozenset({watched})
        )
    collecting = gc.isenabled()
    gc.disable()  # as plan_grouped: a pass allocates much and frees nothing
    try:
        run = _UntilStarted(snapshot, now, config, grouped, frozenset({watched}), session)
        run.watched = watched
        return run.run()
    except _Started:
        return None
    finally:
        if collecting:
            gc.enable()


def _option(label: str, changes: dict, workload_id: WorkloadId, result: Plan) -> StartOption:
    if any(start.workload_id == workload_id for start in result.starts):
        return StartOption(label, changes, True, None, None)
    reason = cast(Reasons, result.reasons).get(workload_id)  # a plan's reasons are a reasons.Reasons
    if reason is None:
        return StartOption(label, changes, False, None, None)
    return StartOption(label, changes, False, reason.estimated_start, reason.code)


def _sooner(option: StartOption, baseline: StartOption) -> bool:
    if option.starts_now:
        return True
    if option.estimated_start is None:
        return False
    return baseline.estimated_start is None or option.estimated_start < baseline.estimated_start
