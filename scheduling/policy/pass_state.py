"""The state of one planner pass (``planner._Pass``) that its mixins (``Shortcuts``, ``Victims``,
``Preempting``, ``Explaining``) read and write, declared for the type checker only: each mixin
takes ``PassState`` as its base under ``TYPE_CHECKING`` and ``object`` at run time, so nothing
changes in how a pass runs. Made by ``_Pass.__init__`` and its phases (planner.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduling.policy.clearable import ClearableNodes
    from scheduling.policy.filing import Candidates, Occupants
    from scheduling.policy.node_keys import KeptNeeds, ReleaseKeys
    from scheduling.policy.placement import FreeIndex, Shape
    from scheduling.policy.preemption import VictimPool
    from scheduling.policy.queues import Grouped
    from scheduling.policy.ranking import FairTree
    from scheduling.policy.reservation import ReleaseProfile
    from scheduling.policy.session import PlanningSession
    from scheduling.policy.types import (
        PendingWorkload,
        Placement,
        PolicyConfig,
        Preemption,
        Reservation,
        RunningWorkload,
        Snapshot,
        Start,
    )


class PassState:
    # inputs (_Pass.__init__)
    snapshot: Snapshot
    now: float
    config: PolicyConfig
    session: PlanningSession
    grouped: Grouped | None
    explain: bool | frozenset[int]
    fairshare: bool
    charge_s: float
    # decisions and per-pass caches (_Pass.__init__)
    starts: list[Start]
    preemptions: list[Preemption]
    reservation: Reservation | None
    reserved_workload: PendingWorkload | None
    # walk order: (workload, its outcome key), or (None, the untried tail's groups) (Shortcuts)
    blocked: list[tuple[PendingWorkload, tuple] | tuple[None, list]]
    # key -> its outcome; the ("protected_until",) entry: attempt -> until when (Explaining)
    outcomes: dict[tuple, Any]
    no_fit: set[Shape]
    no_fit_reserved: set[Shape]
    no_preempt: dict[tuple, tuple | None]
    feasible: dict[Shape, bool]
    fit_at_start: dict[Shape, bool]
    generation: int
    relief: int
    # key -> (generation, victims._Order); under victims._TIERS: (generation, (ratios, sums))
    pools: dict[tuple, tuple[int, Any]]
    profile: ReleaseProfile | None
    touched: set[str]
    requeued: set[int]
    requeued_work: dict[int, PendingWorkload]
    preemptible: tuple | None
    # _rank
    held: list[PendingWorkload]
    tree: FairTree
    queues: list
    # _index
    sizes: dict[str, dict[int, int]]
    gpu_types: dict[str, str]
    reserved: FreeIndex
    unshielded: dict[str, list[RunningWorkload]]
    node_needs: dict[str, frozenset | None] | None
    evicted_nodes: set[str]
    occupants: Occupants
    candidates: Candidates
    used: dict[str, int]
    index: FreeIndex
    start_index: FreeIndex
    release_keys: ReleaseKeys | None
    kept_needs: KeptNeeds | None
    candidates_ordered: bool
    ordered_keys: set[tuple[str, bool]]
    clearable: ClearableNodes

    # methods one mixin calls on another (or on _Pass)
    def _funded(self, workload: PendingWorkload | RunningWorkload) -> bool:
        raise NotImplementedError  # declared here, defined on the pass

    def _feasible(self, shape: Shape) -> bool:
        raise NotImplementedError  # declared here, defined on the pass

    def _may_backfill(self, workload: PendingWorkload) -> bool:
        raise NotImplementedError  # declared here, defined on the pass

    def _start(self, workload: PendingWorkload, placement: Placement, index: FreeIndex) -> None:
        raise NotImplementedError  # declared here, defined on the pass

    def _victim_pool(
        self, workload: PendingWorkload, index: FreeIndex, include_protected: bool
    ) -> VictimPool:
        raise NotImplementedError  # declared here, defined on the pass

    def _blocked_by_protection(
        self, workload: PendingWorkload, shape: Shape, pool: VictimPool, index: FreeIndex
    ) -> tuple | None:
        raise NotImplementedError  # declared here, defined on the pass
