"""The reservation of a pass (DESIGN 5 step 6): the best-ranked workload that still cannot start
reserves the nodes that free up earliest (``ReleaseProfile.earliest``); later work backfills them
only when it cannot delay that start (``rules.may_backfill``)."""

from __future__ import annotations

from scheduling.policy.capacity import Capacity
from scheduling.policy.changes import Changes
from scheduling.policy.placement import Shape
from scheduling.policy.reservation import INFINITE
from scheduling.policy.rules import may_backfill
from scheduling.policy.standing import Standing
from scheduling.policy.types import PendingWorkload, PolicyConfig, Reservation


class Reserver:
    """At most one reservation per walk: made by ``reserve``, given back by ``release``."""

    def __init__(
        self, capacity: Capacity, standing: Standing, changes: Changes, now: float, config: PolicyConfig
    ) -> None:
        self.capacity, self.standing, self.changes = capacity, standing, changes
        self.now, self.config = now, config
        # the release rule's drain (``rules.release_at``): only where the waiter may preempt
        self.preemptive = standing.fairshare and config.preemption and config.drain_release
        self.reservation: Reservation | None = None
        self.workload: PendingWorkload | None = None  # the reserved one

    def start_at(self) -> float:
        """When the reserved job starts: -inf with no reservation (nothing to protect yet)."""
        if self.reservation is None:
            return -INFINITE
        return self.reservation.start_at if self.reservation.start_at is not None else INFINITE

    def may_backfill(self, workload: PendingWorkload) -> bool:
        """May ``workload`` use the reserved nodes (``rules.may_backfill``)?"""
        return may_backfill(workload, self.standing.funded(workload), self.reservation, self.now, self.config)

    def may_reserve(self, workload: PendingWorkload) -> bool:
        """Would ``workload``, failing to start, reserve? Only while nothing is reserved, with
        reservations on, and (under fair share) only for funded work."""
        if self.reservation is not None or not self.config.reservation:
            return False
        return not self.standing.fairshare or self.standing.funded(workload)

    def may_still_reserve(self, queue) -> bool:  # noqa: ANN001 - a FairShareQueue or StaticQueue
        """Nothing is reserved yet and the first workload of ``queue`` that cannot start would be."""
        if self.reservation is not None or not self.config.reservation:
            return False
        return not self.standing.fairshare or bool(queue.funded_allocations())

    def reserve(self, workload: PendingWorkload, shape: Shape) -> None:
        """Reserve for ``workload`` the nodes that free up earliest for ``shape`` (none known: nothing)."""
        start_at, names = self.estimate(shape)
        if not names:
            return
        self.reservation = Reservation(workload.id, names, start_at)
        self.changes.freed()
        self.workload = workload
        self.capacity.reserve_nodes(names)

    def release(self) -> None:
        """Give the reserved nodes back (before a settling walk reserves anew)."""
        self.capacity.unreserve_nodes()
        self.reservation = None
        self.workload = None

    def estimate(self, shape: Shape) -> tuple[float, tuple[str, ...]]:
        """When ``shape`` could start at the earliest, on which nodes (``ReleaseProfile.earliest``)."""
        return self.capacity.release_profile(self.preemptive).earliest(shape)
