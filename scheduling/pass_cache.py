"""What a long-lived process remembers between passes, so a quiet queue of 50,000 is cheap.

Nothing here is kept in the module: a memory is an object its owner creates and passes in. The
Celery task that runs passes keeps one :class:`PassMemory` per worker process
(``scheduling.tasks.PassTask``); the pages keep their own pending workloads
(``scheduling.reports.OptionsMemory``); a caller that passes none gets a fresh one, which reads
everything in full. Every entry is checked against the database on every read: a miss (another
process ran the previous pass, a new worker, a changed row) costs a full read, never a wrong
answer.

- Pending workloads (:class:`PendingMemory`): the policy's ``PendingWorkload`` objects are
  immutable and, once submitted, only the allocation path (a rename) and the hold can change; a
  reader reads (id, allocation) for every pending workload and the hold of held ones, and rebuilds
  only the objects whose key changed. Entries are keyed by the cluster's id *and* creation time,
  so a database that was reset (ids reused, as between tests) never matches an old entry.
- Stored pending reasons (:class:`PassMemory`): what the previous pass wrote, valid only when that
  pass ran with this memory and committed (its id and nonce match the database's latest pass
  before this one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.models import Cluster
from scheduling.policy import PendingWorkload

PendingKey = tuple[str, tuple | None]  # allocation path, (held_by, held_at, held_note) when held
PendingEntry = tuple[PendingKey, PendingWorkload]
ClusterKey = tuple[int, object]  # (cluster id, cluster created_at)
StoredReason = tuple[str, str, int | None, float | None]  # code, message, position, estimated start
PassKey = tuple[int, str]  # a pass's (id, nonce)


@dataclass
class PendingMemory:
    """The pending workloads one reader last read, per cluster (the latest read only)."""

    _clusters: dict[ClusterKey, dict[int, PendingEntry]] = field(default_factory=dict)

    def get(self, cluster: Cluster) -> dict[int, PendingEntry]:
        return self._clusters.get((cluster.pk, cluster.created_at), {})

    def replace(self, cluster: Cluster, entries: dict[int, PendingEntry]) -> None:
        for key in [key for key in self._clusters if key[0] == cluster.pk]:
            del self._clusters[key]
        self._clusters[(cluster.pk, cluster.created_at)] = entries


@dataclass
class PassMemory:
    """What the passes run with one memory remember: the pending workloads the last one read and
    the reasons the last one stored, per cluster."""

    pending: PendingMemory = field(default_factory=PendingMemory)
    _reasons: dict[int, tuple[PassKey, dict[int, StoredReason]]] = field(default_factory=dict)

    def reasons_get(self, cluster_id: int, previous_pass: PassKey | None) -> dict[int, StoredReason] | None:
        """The reasons stored by ``previous_pass`` (the database's latest before this one) if
        that pass ran with this memory and committed; None: read them from the database."""
        cached = self._reasons.get(cluster_id)
        if cached is None or previous_pass is None or cached[0] != previous_pass:
            return None
        return cached[1]

    def reasons_set(self, cluster_id: int, written_by: PassKey, stored: dict[int, StoredReason]) -> None:
        self._reasons[cluster_id] = (written_by, stored)

    def reasons_forget(self, cluster_id: int) -> None:
        self._reasons.pop(cluster_id, None)
