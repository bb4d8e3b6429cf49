"""The standing of a pass (DESIGN 5.3, 5.4): the Fair Tree, charged with the running work and
with each admission, and the concurrency limits in use. Phase 1 makes it (``planner._Pass._rank``);
every start and eviction moves it."""

from __future__ import annotations

from scheduling.policy.ranking import FairTree
from scheduling.policy.types import PendingWorkload, PolicyConfig, RunningWorkload


class Standing:
    """Who is funded, who is over a limit, and the projected charge of what starts or leaves."""

    def __init__(self, tree: FairTree, config: PolicyConfig) -> None:
        self.tree = tree
        self.fairshare = config.ordering == "fairshare"
        self.charge_s = config.projected_charge_s if self.fairshare else 0.0
        self.used: dict[str, int] = {}  # path -> GPUs in use, for the paths with a limit (filing)

    def funded(self, workload: PendingWorkload | RunningWorkload) -> bool:
        """Is ``workload``'s allocation funded (a budget above zero on its whole chain)?"""
        return workload.allocation in self.tree.funded

    def limit_reached(self, workload: PendingWorkload) -> str | None:
        """The first subtree whose concurrency limit ``workload`` would pass (OVER_LIMIT), or None."""
        if not self.used:  # no concurrency limits anywhere
            return None
        for path in self.tree.ancestors.get(workload.allocation, ()):
            limit = self.tree.limit.get(path)
            if limit is not None and self.used[path] + workload.gpus > limit:
                return path
        return None

    def admit(self, workload: PendingWorkload) -> None:
        """``workload`` starts: it counts against the limits and is charged ``gpus * charge``."""
        self._count(workload.allocation, workload.gpus)
        if self.charge_s:
            self.tree.charge(workload.allocation, workload.user, workload.gpus * self.charge_s)

    def remove(self, victim: RunningWorkload, now: float) -> None:
        """``victim`` is preempted: its GPUs leave the limits and what it still owed of its
        projected charge (``gpus * max(0, charge - age)``) is taken back."""
        self._count(victim.allocation, -victim.gpus)
        if self.charge_s:
            owed = victim.gpus * max(0.0, self.charge_s - (now - victim.started_at))
            self.tree.charge(victim.allocation, victim.user, -owed)

    def _count(self, allocation: str, gpus: int) -> None:
        used = self.used
        for path in self.tree.ancestors.get(allocation, ()):
            if path in used:
                used[path] += gpus
