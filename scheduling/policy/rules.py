"""The rules of the scheduling design (DESIGN 5, 5.1, 6), each written once, as a function whose
docstring states it. Every place in the package that applies a rule calls its function here; the
map from each rule to its function is in this package's README.md.

These are pure functions of their arguments: the pass hands them what they read (a workload,
``now``, the configuration, the funding it worked out from the budget tree).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from scheduling.policy.types import PendingWorkload, PolicyConfig, Reservation, RunningWorkload

INFINITE = math.inf
FairTreeKey = tuple[float, float]


# -- the contract: protection (DESIGN 5 step 5 (a)) ----------------------------------------------
def asks_protection(workload: PendingWorkload, funded: bool, config: PolicyConfig) -> bool:
    """Will ``workload`` be protected once it starts? Only funded work that asks for a minimum
    runtime is, and only while the contract holds (``config.contract``; the "priority" and
    "fifo" worlds protect nothing). Unfunded work is never protected."""
    return config.contract and workload.min_runtime_s > 0 and funded


def protected_until(workload: PendingWorkload, funded: bool, now: float, config: PolicyConfig) -> float:
    """Until when ``workload``, started at ``now``, may not be preempted: ``now`` plus its
    minimum runtime, capped at ``config.min_runtime_cap_s``, for work that asks protection
    (``asks_protection``); ``now`` itself (never protected) for all other work."""
    if asks_protection(workload, funded, config):
        return now + min(workload.min_runtime_s, config.min_runtime_cap_s)
    return now


def is_protected(workload: RunningWorkload, now: float, contract: bool) -> bool:
    """Is running ``workload`` protected at ``now``? Only while the contract holds, only funded
    work, and only strictly before its ``protected_until`` (at that instant it is fair game).
    Unfunded work is never protected, whatever its ``protected_until`` says."""
    return contract and workload.funded and workload.protected_until > now


# -- victims (DESIGN 5 step 5) -------------------------------------------------------------------
def may_take_from(victim: FairTreeKey, victim_node: str, preemptor: FairTreeKey, preemptor_node: str) -> bool:
    """The no-flip-flop rule: a funded victim's allocation must still rank at or below the
    preemptor's after the move. Both are compared where their paths part in the budget tree
    (``victim_node`` and ``preemptor_node`` are siblings there), each by its Fair Tree key
    (``fair_tree_key``), the preemptor's with the usage it is charged for the move. It ranks at
    or below when its key is smaller; between equal keys, when its name is not
    smaller (the name breaks ties, ascending, so the later name ranks below)."""
    if victim != preemptor:
        return victim < preemptor
    return victim_node >= preemptor_node


def work_lost(workload: RunningWorkload, now: float, config: PolicyConfig | None = None) -> tuple[float, int]:
    """Victim order among the work of one allocation: least work lost first, then the id.
    The work a preemption throws away is ``gpus * (now - started_at)`` GPU-seconds for work that
    is not resumable; resumable work resumes from its last checkpoint, so it loses the GPU-seconds
    since then when ``config.goodput_victims`` weighs checkpoints and it declares
    ``checkpoint_interval_s`` (checkpoints at ``started_at`` + k intervals), else 0. (Across
    allocations the victims go unfunded first, then the most over-served allocation first:
    ``VictimOrders.tier``; with ``goodput_victims``, ``goodput_victim_key`` first.)"""
    if not workload.resumable:
        return (workload.gpus * (now - workload.started_at), workload.id)
    interval = workload.checkpoint_interval_s
    if config is None or not config.goodput_victims or not interval or interval <= 0:
        return (0.0, workload.id)
    return (workload.gpus * ((now - workload.started_at) % interval), workload.id)


def next_checkpoint(workload: RunningWorkload, now: float) -> float | None:
    """When resumable ``workload`` next saves its progress after ``now`` (checkpoints at
    ``started_at`` + k ``checkpoint_interval_s``), from which on a preemption throws nothing away
    (``work_lost``); None: it is not resumable or declares no interval."""
    interval = workload.checkpoint_interval_s
    if not workload.resumable or not interval or interval <= 0:
        return None
    return now + interval - (now - workload.started_at) % interval


def goodput_victim_key(
    workload: RunningWorkload, now: float, config: PolicyConfig
) -> tuple[bool, bool, float]:
    """Victim order when preemption weighs what it throws away (``config.goodput_victims``):
    unfunded work first (DESIGN 5.5), then idle interactive sessions (busy under 10% over 30
    minutes: squatting), then the least work lost (``work_lost``: a victim that just
    checkpointed goes first). Ties keep the order of ``VictimOrders.tier`` (most over-served first)."""
    return (workload.funded, not workload.idle, work_lost(workload, now, config)[0])


def ends_work_allowed(preemptor_ratio: float, config: PolicyConfig) -> bool:
    """May a rebalancing preemption end funded work that is not resumable (throwing all of it
    away)? Only when the preemptor's allocation is under its share by a clear margin: its
    usage/budget ratio at most ``1 - config.end_work_margin`` (a margin of 0: always)."""
    return config.end_work_margin <= 0 or preemptor_ratio <= 1.0 - config.end_work_margin


def loses_work_allowed(preemptor_ratio: float) -> bool:
    """May a rebalancing preemption throw away work a resumable victim did since its last
    checkpoint? Only for an allocation under its share (usage/budget ratio below 1): one at or
    over its share is owed nothing more, so work lost to serve it buys nothing."""
    return preemptor_ratio < 1.0


def acceptable_loss(
    victim: RunningWorkload,
    now: float,
    config: PolicyConfig,
    may_end: bool,
    may_lose: bool,
    at_checkpoint: bool = False,
    short_bound: float | None = None,
) -> bool:
    """May rebalancing preempt funded ``victim``, judged by the work it would throw away? Work
    that is not resumable only when ending it is allowed (``may_end``: ``ends_work_allowed``).
    Resumable work that loses nothing (``work_lost``) always; otherwise only when losing work is
    allowed (``may_lose``: ``loses_work_allowed``) and it lost at most
    ``config.max_loss_per_gpu_s`` seconds of each GPU's work since its last checkpoint, so a
    victim about to checkpoint is left to do it and taken after (None: any loss, always).
    ``short_bound``: the preemptor is short work, which may make a victim lose up to this many
    GPU-seconds whatever its standing (its ``loss_allowance``). ``at_checkpoint``: judged as at
    its next checkpoint, when resumable work loses nothing (to tell a preemptor what it waits
    for: ``Preemptor.blocked_by_loss``)."""
    if not victim.resumable:
        return may_end
    limit = config.max_loss_per_gpu_s
    if limit is None or at_checkpoint:
        return True
    lost = work_lost(victim, now, config)[0]
    if lost <= 0:
        return True
    if short_bound is not None:
        return lost <= short_bound
    return may_lose and lost <= limit * victim.gpus


def loss_allowance(preemptor: PendingWorkload, config: PolicyConfig) -> float | None:
    """GPU-seconds of work since their last checkpoints (``work_lost``) that the victims of one
    preemption for ``preemptor`` may lose together (None: any, without a loss limit):
    ``config.max_loss_per_gpu_s`` for each GPU it gets. Short work (``is_short``) may cost up to
    ``config.short_max_runtime_s`` per GPU, at most the work it does itself, whatever its
    allocation's standing: the lane promises it a start within seconds, and a victim's next
    checkpoint may be half an hour away."""
    limit = config.max_loss_per_gpu_s
    if limit is None:
        return None
    per_gpu = config.short_max_runtime_s if is_short(preemptor, config) else limit
    return per_gpu * preemptor.gpus


def short_loss_bound(preemptor: PendingWorkload, config: PolicyConfig) -> float | None:
    """What one victim may lose for short work whatever the preemptor's standing: its
    ``loss_allowance`` (``acceptable_loss``'s ``short_bound``); None for other work, which
    ``max_loss_per_gpu_s`` and its standing bound instead."""
    return loss_allowance(preemptor, config) if is_short(preemptor, config) else None


def worth_losing(
    victims: Iterable[RunningWorkload], preemptor: PendingWorkload, now: float, config: PolicyConfig
) -> bool:
    """Is a preemption worth the work its victims throw away? Together the funded resumable
    victims may lose at most ``loss_allowance``: three minutes (``max_loss_per_gpu_s``) for each
    GPU the preemptor gets, so a one-GPU job does not cost a 32-GPU gang three minutes of work on
    each of its GPUs (``acceptable_loss`` bounds each victim by its own GPUs); short work at most
    what it does itself. (Work that is not resumable is ``acceptable_loss``'s alone.)"""
    allowance = loss_allowance(preemptor, config)
    if allowance is None:
        return True
    lost = sum(work_lost(victim, now, config)[0] for victim in victims if victim.funded and victim.resumable)
    return lost <= allowance


def clear_gap(victim_ratio: float, preemptor_ratio: float, config: PolicyConfig) -> bool:
    """Hysteresis between funded allocations: a preemptor may take from a funded allocation only
    if that allocation's usage/budget ratio is above its own by the factor
    ``1 + config.rebalance_hysteresis``, so two allocations near their shares do not trade the
    same GPUs back and forth pass after pass (0: the rank rule ``may_take_from`` alone)."""
    return config.rebalance_hysteresis <= 0 or victim_ratio >= preemptor_ratio * (
        1.0 + config.rebalance_hysteresis
    )


# -- the lane for short work (DESIGN 5.7) --------------------------------------------------------
SHORT_CLASSES = ("debug", "interactive")  # the workload classes the lane serves, whatever their runtime


def is_short(workload: PendingWorkload, config: PolicyConfig) -> bool:
    """Short work, which the lane serves: at most ``config.short_max_gpus`` GPUs, and the debug
    or interactive class or a declared maximum runtime of at most ``config.short_max_runtime_s``."""
    if not short_width(workload.gpus, config):
        return False
    runtime = workload.max_runtime_s
    return workload.workload_class in SHORT_CLASSES or (
        runtime is not None and runtime <= config.short_max_runtime_s
    )


def short_work_apart(config: PolicyConfig, lane: int) -> bool:
    """Does a pass treat short work (``is_short``) apart from other work: a lane of ``lane`` GPUs
    kept for it, or its exemption from ``worth_losing`` under a loss limit?"""
    return lane > 0 or config.max_loss_per_gpu_s is not None


def short_width(gpus: int, config: PolicyConfig) -> bool:
    """Is work of ``gpus`` GPUs narrow enough to be short work (``is_short``)?"""
    return gpus <= config.short_max_gpus


def short_lane_gpus(healthy_gpus: int, config: PolicyConfig) -> int:
    """GPUs that other work must leave free for short work: ``short_lane_fraction`` of the
    healthy GPUs, rounded up (0: no lane)."""
    if config.short_lane_fraction <= 0:
        return 0
    return math.ceil(healthy_gpus * config.short_lane_fraction)


def lane_applies(gpus: int, node_size: int) -> bool:
    """Does the lane hold back work of ``gpus`` GPUs on nodes of ``node_size``? Only work that
    takes part of a node: work that needs whole nodes is never held back, or a job that needs
    every GPU of a small cluster could never start."""
    return gpus < node_size


def leaves_lane(free_gpus: int, gpus: int, lane: int) -> bool:
    """May work that is not short take ``gpus`` of ``free_gpus`` (unreserved)? Only if ``lane``
    GPUs stay free after it."""
    return free_gpus - gpus >= lane


# -- the Fair Tree (DESIGN 5 step 3) -------------------------------------------------------------
def fair_tree_key(budget: float, usage: float) -> FairTreeKey:
    """A node's sort key among its siblings: ``(budget / usage, budget)``; keys compare as
    tuples (the first items that differ decide; a NaN ratio equals nothing and is never larger),
    and the larger key ranks first.

    Sorting siblings by LF = S / U is sorting them by ``budget / usage`` (the sibling totals are
    common to all), and ties go to the larger S, i.e. the larger budget. Usage 0 gives LF = inf
    (nothing used is never over-served: not a bug); budget 0 gives (0, 0) whatever the usage
    (unfunded ranks last). Ties of the whole key go by name, ascending, at the caller."""
    if budget <= 0:
        return (0.0, 0.0)
    return (budget / usage if usage > 0 else INFINITE, budget)


# -- reservation and backfill (DESIGN 5 step 6, DESIGN 6) ----------------------------------------
def release_at(workload: RunningWorkload, now: float, preemptive: bool = True) -> float:
    """When running ``workload``'s GPUs are expected back (``inf``: unknown).

    Without preemption (FIFO, priority) only a declared end counts: ``expected_end or inf``.
    When the waiter may preempt, the drain rule: unfunded work releases now; funded work at
    ``min(expected_end or inf, max(protected_until, now))``, i.e. as soon as it is no longer
    protected. Callers clamp a time before ``now`` to ``now``."""
    end = workload.expected_end if workload.expected_end is not None else INFINITE
    if not preemptive:
        return end
    if not workload.funded:
        return now
    return min(end, max(workload.protected_until, now))


def cannot_delay(workload: PendingWorkload, now: float, reservation_start: float) -> bool:
    """Could ``workload``, started at ``now``, not delay a reserved job starting at
    ``reservation_start`` (``-inf``: nothing reserved)? Yes when it asks no minimum runtime (it
    can be preempted whenever the reserved job needs the nodes) or when it ``ends_in_time``."""
    return workload.min_runtime_s <= 0 or ends_in_time(workload, now, reservation_start)


def ends_in_time(workload: PendingWorkload, now: float, reservation_start: float) -> bool:
    """Does ``workload``, started at ``now``, end by ``reservation_start`` at the latest, by its
    declared maximum runtime? Never when it declares none."""
    runtime = workload.max_runtime_s
    return runtime is not None and now + runtime <= reservation_start


def backfill_test(config: PolicyConfig) -> Callable[[PendingWorkload, float, float], bool]:
    """What of a workload alone decides whether it may use reserved nodes (``may_backfill``),
    given ``(workload, now, reservation_start)``: ``ends_in_time`` under EASY
    (``backfill_by="max_runtime"``), else ``cannot_delay``."""
    return ends_in_time if config.backfill_by == "max_runtime" else cannot_delay


def may_backfill(
    workload: PendingWorkload, funded: bool, reservation: Reservation | None, now: float, config: PolicyConfig
) -> bool:
    """May ``workload`` use the reserved nodes? Yes when nothing is reserved. The reserved start
    ``reservation.start_at`` counts as never when it is unknown (None or 0).

    Only if it cannot delay the reservation: backfill is on, and by ``config.backfill_by``:
    "release" (the drain rule): it will not be protected once started (unfunded work, or no
    contract: it can be preempted when the reserved job starts) or it ``cannot_delay`` the
    reserved start; "max_runtime" (EASY, for worlds without preemption): it ``ends_in_time`` by
    its declared maximum runtime, whatever its funding and minimum runtime. (Work of one
    allocation, so of one funding, under one configuration that agrees on ``cannot_delay``
    agrees on the drain rule.)"""
    if reservation is None:
        return True
    if not config.backfill:
        return False
    start = reservation.start_at or INFINITE
    if config.backfill_by == "max_runtime":
        return ends_in_time(workload, now, start)
    return not (config.contract and funded) or cannot_delay(workload, now, start)
