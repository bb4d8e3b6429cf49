"""What a long-lived worker remembers between passes, so a quiet queue of 50,000 is cheap.

Both caches live in the process, per cluster, and are checked against the database every pass;
a miss (another process ran the previous pass, a new worker, a changed row) costs a full read,
never a wrong answer.

- Pending workloads: the policy's ``PendingWorkload`` objects are immutable and, once submitted,
  only the allocation path (a rename) and the hold can change; the pass reads (id, allocation,
  held_at, submitted_at, GPUs) for every pending workload and rebuilds only the objects whose key
  changed (the last two guard against ids reused after a database reset, as in tests).
- Stored pending reasons: what the previous pass wrote, valid only when that pass ran in this
  process and committed (its id and nonce match the database's latest pass before this one).
"""

from __future__ import annotations

from scheduling.policy import PendingWorkload

PendingKey = tuple[str, float | None, float, int]  # allocation path, held_at, submitted_at, GPUs
StoredReason = tuple[str, str, int | None, float | None]  # code, message, position, estimated start

_pending: dict[int, dict[int, tuple[PendingKey, PendingWorkload]]] = {}
_reasons: dict[int, tuple[tuple[int, str], dict[int, StoredReason]]] = {}


def pending_get(cluster_id: int) -> dict[int, tuple[PendingKey, PendingWorkload]]:
    return _pending.setdefault(cluster_id, {})


def pending_replace(cluster_id: int, entries: dict[int, tuple[PendingKey, PendingWorkload]]) -> None:
    _pending[cluster_id] = entries


def reasons_get(cluster_id: int, previous_pass: tuple[int, str] | None) -> dict[int, StoredReason] | None:
    cached = _reasons.get(cluster_id)
    if cached is None or previous_pass is None or cached[0] != previous_pass:
        return None
    return cached[1]


def reasons_set(cluster_id: int, written_by: tuple[int, str], stored: dict[int, StoredReason]) -> None:
    _reasons[cluster_id] = (written_by, stored)


def reasons_forget(cluster_id: int) -> None:
    _reasons.pop(cluster_id, None)


def clear() -> None:
    _pending.clear()
    _reasons.clear()
