"""What a long-lived worker remembers between passes, so a quiet queue of 50,000 is cheap.

Both caches live in the process, per cluster, and are checked against the database every pass;
a miss (another process ran the previous pass, a new worker, a changed row) costs a full read,
never a wrong answer.

- Pending workloads: the policy's ``PendingWorkload`` objects are immutable and, once submitted,
  only the allocation path (a rename) and the hold can change; the pass reads (id, allocation)
  for every pending workload and the hold of held ones, and rebuilds only the objects whose key
  changed. The cache is keyed by the cluster's id *and* creation time, so a database that was
  reset (ids reused, as between tests) never matches an old entry.
- Stored pending reasons: what the previous pass wrote, valid only when that pass ran in this
  process and committed (its id and nonce match the database's latest pass before this one).
"""

from __future__ import annotations

from scheduling.models import Cluster
from scheduling.policy import PendingWorkload

PendingKey = tuple[str, tuple | None]  # allocation path, (held_by, held_at, held_note) when held
ClusterKey = tuple[int, object]  # (cluster id, cluster created_at)
StoredReason = tuple[str, str, int | None, float | None]  # code, message, position, estimated start

_pending: dict[ClusterKey, dict[int, tuple[PendingKey, PendingWorkload]]] = {}
_reasons: dict[int, tuple[tuple[int, str], dict[int, StoredReason]]] = {}


def pending_get(cluster: Cluster) -> dict[int, tuple[PendingKey, PendingWorkload]]:
    return _pending.get((cluster.pk, cluster.created_at), {})


def pending_replace(cluster: Cluster, entries: dict[int, tuple[PendingKey, PendingWorkload]]) -> None:
    for key in [key for key in _pending if key[0] == cluster.pk]:
        del _pending[key]
    _pending[(cluster.pk, cluster.created_at)] = entries


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
