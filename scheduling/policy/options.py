"""What would start a pending workload sooner? Each option is decided by re-planning, not guessed.

``start_options`` tries variants of one pending workload against the same snapshot and the same
``plan()``: fewer GPUs (halving down to 1), minimum runtime 0 (fully preemptible, so it may backfill
reserved nodes), charged to no budget (unfunded: opportunistic, never protected), and every other
GPU type the cluster has. An option is returned when the variant starts in this pass, or has a
known estimated start earlier than the workload as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scheduling.policy.planner import plan_grouped
from scheduling.policy.queues import Grouped, group_pending, swap_grouped
from scheduling.policy.reasons import gpus_phrase
from scheduling.policy.types import PendingWorkload, Plan, PolicyConfig, ReasonCode, Snapshot, WorkloadId

UNFUNDED_ALLOCATION = "(unfunded)"


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
    workload = next((w for w in snapshot.pending if w.id == workload_id), None)
    if workload is None or workload.held:
        return ()
    # Read the queue once; each variant swaps its one workload into copies of these.
    shared = (
        group_pending(snapshot.pending),
        [at for at, w in enumerate(snapshot.pending) if w.id == workload_id],
    )
    baseline = _decide(snapshot, shared, workload, "as it is", {}, now, config)
    if baseline.starts_now:
        return ()
    options = (
        _decide(snapshot, shared, workload, label, changes, now, config)
        for label, changes in _variants(snapshot, workload)
    )
    return tuple(option for option in options if _sooner(option, baseline))


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
) -> StartOption:
    """Re-plan with ``workload`` changed. ``shared``: the snapshot's grouped queue and the places
    of ``workload`` in ``snapshot.pending``."""
    variant = replace(workload, **changes)
    grouped, places = shared
    pending = list(snapshot.pending)
    for at in places:
        pending[at] = variant
    variant_grouped = swap_grouped(grouped, workload, variant)
    result = plan_grouped(replace(snapshot, pending=tuple(pending)), now, config, variant_grouped)
    return _option(label, changes, workload.id, result)


def _option(label: str, changes: dict, workload_id: WorkloadId, result: Plan) -> StartOption:
    if any(start.workload_id == workload_id for start in result.starts):
        return StartOption(label, changes, True, None, None)
    reason = next((r for r in result.reasons if r.workload_id == workload_id), None)
    if reason is None:
        return StartOption(label, changes, False, None, None)
    return StartOption(label, changes, False, reason.estimated_start, reason.code)


def _sooner(option: StartOption, baseline: StartOption) -> bool:
    if option.starts_now:
        return True
    if option.estimated_start is None:
        return False
    return baseline.estimated_start is None or option.estimated_start < baseline.estimated_start
