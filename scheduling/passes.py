"""The scheduling pass: one per cluster, under a database claim, in numbered and timed phases.

1. Reconcile: observe the backend and make runs and workload states agree with it; then stop the
   jobs whose preemption's grace period has passed (``dispatch.preemptions_finish``).
2. Snapshot: one set-based read into the policy's dataclasses.
3. Plan: the pure policy decides starts, preemptions, reservations and pending reasons.
4. Persist: decisions, pending reasons (only those that changed) and owed GPU-seconds, in one
   transaction, *before* anything is sent to the backend.
5. Dispatch: submit new workloads, push preemptions, starts and cancels, then record their effects.

After the phases, untimed: on commit the pass is folded into the pages' hourly rollups (its
duration stored as ``rollups_ms``). A Slurm cluster's accounts are mirrored by their own task
(``scheduling.mirror_slurm_accounts``), never inside a pass.

A pass that dies after 4 leaves undispatched decisions; the next pass supersedes them, reconciles
with what the backend really did (starts are idempotent by workload + attempt) and plans again,
so nothing is lost and nothing starts twice. A backend that does not answer ends the pass after
phase 1: every pending workload gets the reason BACKEND_UNAVAILABLE and nothing else changes.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from scheduling.backend_notes import backend_notes_write
from scheduling.backends.base import Backend, BackendUnavailable
from scheduling.backends.registry import backend_for
from scheduling.dispatch import dispatch, preemptions_finish
from scheduling.locks import pass_claim, retry_on_contention
from scheduling.models import Cluster, PassStatus, SchedulingPass
from scheduling.pass_cache import PassMemory
from scheduling.persist import persist_backend_unavailable, persist_plan
from scheduling.policy import Plan, PolicyConfig, Snapshot, plan
from scheduling.reconcile import reconcile
from scheduling.snapshot import funded_allocation_ids, snapshot_read

logger = logging.getLogger(__name__)

Planner = Callable[[Snapshot, float, PolicyConfig], Plan]  # the signature of scheduling.policy.plan


@dataclass(frozen=True)
class PassOutcome:
    """What ``run_pass`` did: ``ran`` is False when another process held the cluster's pass."""

    ran: bool
    pass_id: int | None = None
    status: str = ""


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector during a pass.

    A pass builds ~100,000 small objects (snapshot rows, reasons) that reference counting frees on
    its own; left on, the collector re-scans that growing heap again and again and costs a third
    of a large pass. Cycles made meanwhile are collected at the next collection after the pass.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def phase(record: SchedulingPass, name: str) -> Iterator[None]:
    """Time one phase into ``record.<name>_ms`` (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        setattr(record, f"{name}_ms", (time.perf_counter() - started) * 1000.0)


def run_pass(
    *,
    cluster_id: int,
    now: datetime | None = None,
    backend: Backend | None = None,
    planner: Planner | None = None,
    memory: PassMemory | None = None,
) -> PassOutcome:
    """Run one pass for a cluster now, synchronously; returns at once if another pass holds it.

    ``memory``: what earlier passes run with it remember (``scheduling.pass_cache``), so a quiet
    queue is read and written in part; the Celery task keeps one per worker process. None: a
    fresh one, so this pass reads the pending workloads and the stored reasons in full."""
    with pass_claim(cluster_id) as claimed:
        if not claimed:
            logger.info("pass for cluster %s skipped: another pass holds it", cluster_id)
            return PassOutcome(ran=False, status="skipped")
        cluster = Cluster.objects.get(pk=cluster_id)
        now = now or timezone.now()
        backend = backend or backend_for(cluster, clock=now.timestamp)
        record = _pass_begin(cluster=cluster, now=now)
        if record is None:
            logger.warning("pass for cluster %s skipped: the database stayed locked", cluster_id)
            return PassOutcome(ran=False, status="skipped")
        with cyclic_gc_paused():
            _pass_run(
                record,
                cluster=cluster,
                backend=backend,
                planner=planner or plan,
                now=now,
                memory=memory or PassMemory(),
            )
        return PassOutcome(ran=True, pass_id=record.pk, status=record.status)


def _pass_begin(*, cluster: Cluster, now: datetime) -> SchedulingPass | None:
    """The pass's record (None: the database stayed locked). We hold the claim, so any pass of
    this cluster still marked running died mid-way. On SQLite the losing claimant may still be
    writing: both writes wait it out (``retry_on_contention``)."""

    def begin() -> SchedulingPass:
        SchedulingPass.objects.filter(cluster=cluster, status=PassStatus.RUNNING).update(
            status=PassStatus.FAILED, error="interrupted (the process running it stopped)"
        )
        return SchedulingPass.objects.create(cluster=cluster, started_at=now)

    return retry_on_contention(begin)


def _pass_run(
    record: SchedulingPass,
    *,
    cluster: Cluster,
    backend: Backend,
    planner: Planner,
    now: datetime,
    memory: PassMemory,
) -> None:
    started = time.perf_counter()
    try:
        _phases(record, cluster=cluster, backend=backend, planner=planner, now=now, memory=memory)
        record.status = PassStatus.COMPLETED
    except BackendUnavailable as error:
        record.status, record.error = PassStatus.BACKEND_UNAVAILABLE, str(error)
        persist_backend_unavailable(record=record, cluster=cluster, error=str(error), now=now, memory=memory)
    except Exception as error:
        record.status, record.error = PassStatus.FAILED, f"{type(error).__name__}: {error}"
        raise
    finally:
        record.total_ms = (time.perf_counter() - started) * 1000.0
        record.finished_at = now + timedelta(milliseconds=record.total_ms)
        record.save()
        _rollups_fold_on_commit(record)
        _notifications_on_commit(record)


def _phases(
    record: SchedulingPass,
    *,
    cluster: Cluster,
    backend: Backend,
    planner: Planner,
    now: datetime,
    memory: PassMemory,
) -> None:
    # 1. Reconcile
    with phase(record, "reconcile"):
        observed = backend.observe()
        counts = reconcile(
            cluster=cluster, state=observed, now=now, funded_ids=funded_allocation_ids(cluster)
        )
        record.runs_opened, record.runs_closed, record.adopted_count = (
            counts.runs_opened,
            counts.runs_closed,
            counts.adopted,
        )
        if counts.skipped:  # the pass goes on; the jobs it left alone are named on it
            record.error = "reconcile skipped " + "; ".join(counts.skipped)
        # preemptions whose grace period has passed: stopped now, so the snapshot sees them waiting
        preemptions_finish(cluster=cluster, backend=backend, now=now)
    # 2. Snapshot
    with phase(record, "snapshot"):
        inputs = snapshot_read(
            cluster=cluster, now=now, backend_name=getattr(backend, "name", "backend"), memory=memory.pending
        )
    # 3. Plan
    with phase(record, "plan"):
        decided = planner(inputs.snapshot, now.timestamp(), inputs.config)
    # 4. Persist
    with phase(record, "persist"), transaction.atomic():
        persist_plan(record=record, cluster=cluster, inputs=inputs, plan=decided, now=now, memory=memory)
    # 5. Dispatch
    with phase(record, "dispatch"):
        dispatch(record=record, cluster=cluster, backend=backend, now=now)
    # 6. Tell the waiting jobs why they wait, in the backend's own tools (outside the timed phases)
    backend_notes_write(cluster=cluster, backend=backend)


def _rollups_fold_on_commit(record: SchedulingPass) -> None:
    """Once the pass's writes commit, fold them into the pages' rollups (``portal.rollups``).

    Outside the timed phases and ``total_ms``; its own duration is stored as ``rollups_ms``. A
    failure is logged: the pages may lag a pass, the scheduler must not stop for them.
    """
    pass_id, cluster_id, finished_at = record.pk, record.cluster_id, record.finished_at

    def fold() -> None:
        from portal.rollups import rollups_fold

        started = time.perf_counter()
        try:
            rollups_fold(cluster_id=cluster_id, now=finished_at)  # type: ignore[arg-type]  # set when the pass ended
        except Exception:  # any failure: logged, the next pass folds what this one missed
            logger.exception("rollups_fold failed for cluster %s", cluster_id)
            return
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        SchedulingPass.objects.filter(pk=pass_id).update(rollups_ms=elapsed_ms)

    transaction.on_commit(fold)


def _notifications_on_commit(record: SchedulingPass) -> None:
    """A pass that opened or closed runs recorded "started" / "preempted" events in its transactions
    (``scheduling.services.runs``): one task fans them all out, outside the timed phases."""
    if record.runs_opened or record.runs_closed or record.started_count or record.preempted_count:
        from notifications.services import fan_out_due_queue

        transaction.on_commit(fan_out_due_queue, robust=True)


def passes_due(*, now: datetime | None = None) -> list[tuple[int, int]]:
    """(cluster id, interval s) for every cluster whose last pass started at least its interval ago."""
    now = now or timezone.now()
    last = dict(
        SchedulingPass.objects.values("cluster_id")
        .annotate(latest=Max("started_at"))
        .values_list("cluster_id", "latest")
    )
    due = []
    for cluster_id, interval_s in Cluster.objects.order_by("id").values_list("id", "pass_interval_s"):
        started = last.get(cluster_id)
        # Slack of a quarter interval: beat ticks at about the same rate, and a pass queued behind
        # another cluster's starts a little late; without slack such a cluster would skip every other tick.
        if started is None or (now - started).total_seconds() >= interval_s - max(1.0, interval_s / 4):
            due.append((cluster_id, interval_s))
    return due
