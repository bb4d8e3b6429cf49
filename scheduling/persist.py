"""Phase 4 of the pass: write the plan before anything reaches the backend.

Set-based: decisions in one bulk insert; pending reasons compared with what is stored and written
only where the code, message or position changed (or the estimated start moved by more than
ESTIMATE_SLACK_S), so a quiet queue of 50,000 costs one read and almost no writes.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from django.db import connection, transaction
from django.utils import timezone

from notifications.checks import backend_unavailable_check
from scheduling.accounting import accounting_charge_owed
from scheduling.bulk import Epoch, fetch_rows, update_rows
from scheduling.models import (
    Cluster,
    Decision,
    DecisionKind,
    PassLease,
    PendingReason,
    Run,
    SchedulingPass,
    Workload,
    WorkloadState,
)
from scheduling.pass_cache import PassMemory
from scheduling.policy import PendingReason as PolicyReason
from scheduling.policy import Plan, ReasonCode
from scheduling.policy.reasons import Outcome, Reasons, make_reasons
from scheduling.snapshot import PassInputs

logger = logging.getLogger(__name__)
ESTIMATE_SLACK_S = 60.0
REASON_FIELDS = ["code", "params", "message", "position", "estimated_start", "updated_at"]


def _at(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds is not None else None


def persist_plan(
    *,
    record: SchedulingPass,
    cluster: Cluster,
    inputs: PassInputs,
    plan: Plan,
    now: datetime,
    memory: PassMemory,
) -> None:
    decisions = _decisions(record=record, cluster=cluster, plan=plan, now=now)
    Decision.objects.bulk_create(decisions, batch_size=1000)
    record.reasons_written = pending_reasons_write(
        cluster=cluster, reasons=plan.reasons, now=now, record=record, memory=memory
    )
    accounting_charge_owed(cluster_id=cluster.pk, now=now, owed_gpus=inputs.owed_gpus)
    if inputs.standing:
        PassLease.objects.filter(pk=cluster.pk).update(standing=inputs.standing)
    record.pending_count = len(inputs.snapshot.pending)
    record.running_count = len(inputs.snapshot.running)
    record.started_count, record.preempted_count = len(plan.starts), len(plan.preemptions)
    record.reserved_count = len(plan.reservations)
    record.fair_share = {path: _finite(ratio) for path, ratio in plan.fair_share.items()}
    record.plan_timings_ms = {name: round(ms, 3) for name, ms in plan.timings_ms.items()}
    record.save()


def _finite(value: object) -> object:
    """JSON has no infinity or NaN: store None (e.g. a fair-share ratio with no budget share)."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


def _json_safe(params: Mapping, cleaned: dict[int, dict]) -> dict:
    key = id(params)
    if key not in cleaned:
        cleaned[key] = {name: _finite(value) for name, value in params.items()}
    return cleaned[key]


def _decisions(*, record: SchedulingPass, cluster: Cluster, plan: Plan, now: datetime) -> list[Decision]:
    attempts = dict(
        Workload.objects.filter(pk__in=[s.workload_id for s in plan.starts]).values_list("id", "attempt")
    )
    running_attempts = dict(
        Run.objects.filter(
            cluster=cluster, ended_at__isnull=True, workload_id__in=[p.workload_id for p in plan.preemptions]
        ).values_list("workload_id", "attempt")
    )
    common = {"scheduling_pass": record, "cluster": cluster, "created_at": now}
    return [
        *(
            Decision(
                workload_id=p.workload_id,
                kind=DecisionKind.PREEMPT,
                attempt=running_attempts.get(p.workload_id, 0),
                requeue=p.requeue,
                preemptor_id=p.preemptor_id,
                reason=p.reason,
                **common,
            )
            for p in plan.preemptions
        ),
        *(
            Decision(
                workload_id=s.workload_id,
                kind=DecisionKind.START,
                attempt=attempts.get(s.workload_id, 0) + 1,
                placement=[list(piece) for piece in s.placement],
                protected_until=_at(s.protected_until),
                funded=s.funded,
                **common,
            )
            for s in plan.starts
        ),
        *(
            Decision(
                workload_id=r.workload_id,
                kind=DecisionKind.RESERVE,
                placement=[[n, 0] for n in r.nodes],
                start_at=_at(r.start_at),
                **common,
            )
            for r in plan.reservations
        ),
    ]


def _differs(stored: tuple, code: str, message: str, position: int, estimated: float | None) -> bool:
    old_code, old_message, old_position, old_estimated = stored
    if (old_code, old_message, old_position) != (code, message, position):
        return True
    if (old_estimated is None) != (estimated is None):
        return True
    return old_estimated is not None and abs(old_estimated - estimated) > ESTIMATE_SLACK_S


def _entries(reasons: Sequence[PolicyReason]) -> Iterable[tuple[int, Outcome, int]]:
    """(workload id, (code, params, message, estimate), position) per reason, in order."""
    if isinstance(reasons, Reasons):
        return reasons.entries()
    return ((r.workload_id, (r.code, r.params, r.message, r.estimated_start), r.position) for r in reasons)


def _made(entries: list[tuple[int, Outcome, int]]) -> list[PolicyReason]:
    if not entries:
        return []
    ids, outcomes, positions = zip(*entries, strict=True)
    return make_reasons(ids, outcomes, positions)


def pending_reasons_write(
    *,
    cluster: Cluster,
    reasons: Sequence[PolicyReason],
    now: datetime,
    record: SchedulingPass,
    memory: PassMemory,
) -> int:
    """Make the stored reasons equal the plan's (one per pending workload); returns rows written.

    The comparison runs on plain tuples (times as epoch floats), against what the previous pass
    wrote when it ran with ``memory``, else against one read; model rows are built only for what
    changed, so an unchanged queue of 50,000 costs no writes.
    """
    stored = memory.reasons_get(cluster.pk, _previous_pass(cluster=cluster, record=record))
    if stored is None:
        stored = _stored_reasons(cluster)
    fresh_entries: list[tuple[int, Outcome, int]] = []  # reason objects are made only for what is written
    changed_entries: list[tuple[int, Outcome, int]] = []
    seen = set()
    for entry in _entries(reasons):
        workload_id, (code, _, message, estimated), position = entry
        seen.add(workload_id)
        before = stored.get(workload_id)
        if before is None:
            fresh_entries.append(entry)
        elif _differs(before, code, message, position, estimated):
            changed_entries.append(entry)
    fresh, changed = _made(fresh_entries), _made(changed_entries)
    gone = list(stored.keys() - seen)
    if connection.vendor == "postgresql":
        _replace_by_copy(fresh=fresh, changed=changed, gone=gone, now=now)
    else:
        cleaned: dict[int, dict] = {}  # the reasons of one group share one params mapping: clean it once
        PendingReason.objects.bulk_create([_row(r, cleaned, now) for r in fresh], batch_size=2000)
        PendingReason.objects.bulk_update(
            [_row(r, cleaned, now) for r in changed], REASON_FIELDS, batch_size=500
        )
        for start in range(0, len(gone), 5000):
            PendingReason.objects.filter(workload_id__in=gone[start : start + 5000]).delete()
    remembered = {**stored, **{r.workload_id: _stored(r) for r in (*fresh, *changed)}}
    for workload_id in gone:
        del remembered[workload_id]
    written_by = (record.pk, record.nonce)
    transaction.on_commit(lambda: memory.reasons_set(cluster.pk, written_by, remembered))
    return len(fresh) + len(changed) + len(gone)


def _replace_by_copy(
    *, fresh: list[PolicyReason], changed: list[PolicyReason], gone: list[int], now: datetime
) -> None:
    """PostgreSQL: delete the changed and gone rows, COPY the new versions in (same transaction).

    When a pass moves the whole queue (starts shift every position behind them), rewriting
    50,000 rows this way takes a fraction of what 50,000 UPDATEs do; readers see the old rows
    until the pass commits.
    """
    table = PendingReason._meta.db_table
    with connection.cursor() as cursor:
        doomed = [r.workload_id for r in changed] + gone
        if doomed:
            cursor.execute(f"DELETE FROM {table} WHERE workload_id = ANY(%s)", [doomed])
        encoded: dict[int, str] = {}  # the reasons of one group share one params mapping: encode it once
        columns = "workload_id, code, params, message, position, estimated_start, updated_at"
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for r in (*fresh, *changed):
                key = id(r.params)
                if key not in encoded:
                    encoded[key] = json.dumps({name: _finite(value) for name, value in r.params.items()})
                copy.write_row((r.workload_id, r.code, encoded[key], r.message, r.position,
                                _at(r.estimated_start), now))  # fmt: skip


def _previous_pass(*, cluster: Cluster, record: SchedulingPass) -> tuple[int, str] | None:
    return (
        SchedulingPass.objects.filter(cluster=cluster, pk__lt=record.pk)
        .order_by("-pk")
        .values_list("pk", "nonce")
        .first()
    )


def _stored_reasons(cluster: Cluster) -> dict[int, tuple]:
    rows = (
        PendingReason.objects.filter(workload__cluster=cluster)
        .annotate(estimated_ts=Epoch("estimated_start"))
        .values_list("workload_id", "code", "message", "position", "estimated_ts")
    )
    return {
        wid: (code, message, position, estimated)
        for wid, code, message, position, estimated in fetch_rows(rows)
    }


def _stored(reason: PolicyReason) -> tuple:
    # ReasonCode is a str: it compares equal to the code read back from the database.
    return (reason.code, reason.message, reason.position, reason.estimated_start)


def _row(reason: PolicyReason, cleaned: dict[int, dict], now: datetime) -> PendingReason:
    return PendingReason(
        workload_id=reason.workload_id,
        code=str(reason.code),
        params=_json_safe(reason.params, cleaned),
        message=reason.message,
        position=reason.position,
        estimated_start=_at(reason.estimated_start),
        updated_at=now,
    )


def persist_backend_unavailable(
    *, record: SchedulingPass, cluster: Cluster, error: str, now: datetime, memory: PassMemory
) -> None:
    """Every pending workload's reason becomes BACKEND_UNAVAILABLE (kept as is when it already is)."""
    memory.reasons_forget(cluster.pk)
    name = cluster.get_backend_kind_display()
    local = timezone.localtime(now).strftime("%H:%M")
    message = f"the {name} backend did not answer at {local}; retrying"
    pending = Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING)
    stored = dict(PendingReason.objects.filter(workload__cluster=cluster).values_list("workload_id", "code"))
    rows = [
        PendingReason(
            workload_id=wid,
            code=ReasonCode.BACKEND_UNAVAILABLE,
            params={"backend": name, "error": error},
            message=message,
            position=None,
            estimated_start=None,
            updated_at=now,
        )
        for wid in pending.values_list("id", flat=True)
        if stored.get(wid) != ReasonCode.BACKEND_UNAVAILABLE
    ]
    PendingReason.objects.bulk_create([r for r in rows if r.workload_id not in stored], batch_size=2000)
    update_rows(PendingReason, [r for r in rows if r.workload_id in stored], REASON_FIELDS)
    record.reasons_written = len(rows)
    record.pending_count = len(stored) if not rows else pending.count()
    try:  # on-call is told once the outage is long; a failure to tell must not fail the pass
        backend_unavailable_check(cluster=cluster, now=now, error=error)
    except Exception:
        logger.exception("could not record the backend outage of cluster %s", cluster.pk)
