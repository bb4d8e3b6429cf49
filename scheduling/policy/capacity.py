"""The capacity of a pass (DESIGN 5.1, 5.6): the free-GPU indexes (unreserved and reserved), the
running work filed onto nodes, and when GPUs free up (the release profile). Phase 2 makes it
(``planner._Pass._index``); starts, evictions and the reservation change it."""

from __future__ import annotations

from scheduling.policy import rules
from scheduling.policy.clearable import ClearableNodes
from scheduling.policy.filing import Filed, drop_identical
from scheduling.policy.inventory import fits_inventory
from scheduling.policy.placement import FreeIndex, Shape
from scheduling.policy.reservation import ReleaseProfile
from scheduling.policy.session import PlanningSession
from scheduling.policy.types import PendingWorkload, Placement, PolicyConfig, RunningWorkload, Snapshot


class Capacity:
    """Where work runs and where it can start; every placement of a pass is made here."""

    def __init__(
        self,
        snapshot: Snapshot,
        now: float,
        session: PlanningSession,
        filed: Filed,
        sizes: dict[str, dict[int, int]],
        gpu_types: dict[str, str],
        lane: int,
        config: PolicyConfig,
    ) -> None:
        self.snapshot, self.now, self.session = snapshot, now, session
        self.lane, self.config = lane, config  # GPUs kept free for short work (``holds_back``)
        self.sizes, self.gpu_types = sizes, gpu_types
        (
            self.occupants,
            self.candidates,
            _,  # the limits in use: the standing's
            self.index,
            self.start_index,
            self.release_keys,
            self.kept_needs,
            self.candidates_ordered,  # see victims.VictimOrders.in_order
        ) = filed
        self.reserved = FreeIndex()  # the reserved nodes (reserving.py), empty until then
        self.clearable = ClearableNodes(session, snapshot.nodes, self.index)
        self.feasible_shapes: dict[Shape, bool] = {}
        self.no_fit: set[Shape] = set()  # shapes that did not fit unreserved GPUs since GPUs freed
        self.no_fit_reserved: set[Shape] = set()  # ... nor reserved ones
        self.fitted_at_start: dict[Shape, bool] = {}
        self.profile: ReleaseProfile | None = None
        self.touched: set[str] = set()  # nodes whose occupants changed since the profile was built

    def feasible(self, shape: Shape) -> bool:
        """Could ``shape`` ever run on the healthy nodes (``inventory.fits_inventory``)?"""
        known = self.feasible_shapes.get(shape)
        if known is None:
            known = self.feasible_shapes[shape] = fits_inventory(shape, self.sizes)
        return known

    def place(self, shape: Shape, backfill: bool) -> tuple[Placement, FreeIndex] | None:
        """On unreserved nodes, else on reserved ones if it may backfill them; a shape that did
        not fit is not tried again until GPUs come free (``no_fit``, cleared by ``vacate``)."""
        if shape not in self.no_fit:
            placement = self.index.place(shape)
            if placement is not None:
                return placement, self.index
            self.no_fit.add(shape)
        if backfill and shape not in self.no_fit_reserved:
            placement = self.reserved.place(shape)
            if placement is not None:
                return placement, self.reserved
            self.no_fit_reserved.add(shape)
        return None

    def holds_back(self, workload: PendingWorkload, shape: Shape, index: FreeIndex) -> bool:
        """Would ``workload`` (of ``shape``), placed on ``index``, take GPUs kept free for short
        work? Only work that is not short and takes part of a node, placed on unreserved nodes
        (``rules.is_short``, ``rules.lane_applies``, ``rules.leaves_lane``)."""
        if not self.lane or index is not self.index or rules.is_short(workload, self.config):
            return False
        return self.lane_holds_back(shape)

    def lane_holds_back(self, shape: Shape) -> bool:
        """Would work of ``shape`` that is not short, placed on unreserved nodes, take GPUs kept
        free for short work (``rules.lane_applies``, ``rules.leaves_lane``)?"""
        if not self.lane or not rules.lane_applies(shape[0], self.node_size(shape)):
            return False
        return not rules.leaves_lane(self.index.free_gpus(None), shape[0], self.lane)

    def occupy(self, workload: RunningWorkload) -> None:
        """``workload`` started on its placement (its GPUs are already taken from the index)."""
        occupants = self.occupants
        for name, _ in workload.placement:
            here = occupants.get(name)
            # a node's list may be the carried filing's own (filing.py): changed only in a copy
            occupants[name] = [workload] if here is None else [*here, workload]
            self.touched.add(name)
        self.clearable.recount([name for name, _ in workload.placement])

    def vacate(self, victim: RunningWorkload) -> None:
        """``victim`` is preempted: its GPUs are free again (in whichever index holds each node)
        and shapes that did not fit are worth trying again."""
        self.index.give(victim.placement)
        self.reserved.give(victim.placement)
        self.clearable.recount([name for name, _ in victim.placement])
        for name, _ in victim.placement:
            # a copy without it (the list may be the carried filing's own; equal is not enough)
            self.occupants[name] = [occupant for occupant in self.occupants[name] if occupant is not victim]
            self.touched.add(name)
        drop_identical(self.candidates[(victim.allocation, victim.funded)], victim)
        self.forget_no_fit()

    def forget_no_fit(self) -> None:
        self.no_fit.clear()
        self.no_fit_reserved.clear()

    def reserve_nodes(self, names: tuple[str, ...]) -> None:
        """Move ``names`` from the unreserved index to the reserved one."""
        for name in names:
            spec = self.index.spec[name]
            self.reserved.add_node(spec, self.index.remove_node(name))

    def unreserve_nodes(self) -> None:
        """Give every reserved node back to the unreserved index."""
        for name in sorted(self.reserved.spec):
            spec = self.reserved.spec[name]
            self.index.add_node(spec, self.reserved.remove_node(name))

    def release_profile(self, preemptive: bool) -> ReleaseProfile:
        """When GPUs free up, from what runs now (``preemptive``: by the drain rule, see
        ``rules.release_at``): built once, then only the nodes that work started on or left
        since (``touched``) are recomputed."""
        if self.profile is None:
            nodes = self.snapshot.nodes
            self.profile = ReleaseProfile(
                (node for node in nodes if node.healthy),  # read only if ``nodes`` is not carried
                self._free(),
                self.occupants,
                self.now,
                preemptive,
                self.release_keys,
                self.touched,
                source=nodes,
                session=self.session,
            )
        elif self.touched:
            self.profile.refresh(self.touched, self._free(), self.occupants)
        self.touched.clear()
        return self.profile

    def _free(self) -> dict[str, int]:
        return {**self.index.free, **self.reserved.free}

    def fit_at_start(self, shape: Shape) -> bool:
        """Would ``shape`` have fitted on the GPUs free when the pass began? (Then work ahead took them.)"""
        memo = self.fitted_at_start
        if shape not in memo:
            memo[shape] = self.start_index.place(shape) is not None
        return memo[shape]

    def free_gpus(self, gpu_type: str | None) -> int:
        """Free GPUs of ``gpu_type`` (any for None), reserved or not."""
        return self.index.free_gpus(gpu_type) + self.reserved.free_gpus(gpu_type)

    def nodes_with_free_gpus(self, shape: Shape) -> int:
        """How many nodes of ``shape``'s GPU type have any GPU free, reserved or not."""
        return sum(
            1
            for index in (self.index, self.reserved)
            for name, count in index.free.items()
            if count and (shape[2] is None or index.spec[name].gpu_type == shape[2])
        )

    def node_size(self, shape: Shape) -> int:
        """The largest node size of the shape's GPU type (any type for None)."""
        return max(
            (size for kind, by_size in self.sizes.items() if shape[2] in (None, kind) for size in by_size),
            default=0,
        )
