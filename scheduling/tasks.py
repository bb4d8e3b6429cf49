"""Celery entry points: thin, id in, call the service. Beat runs ``schedule_passes`` every
SCHEDULING_PASS_INTERVAL_S seconds; it queues one pass per cluster whose own interval has elapsed."""

from __future__ import annotations

from functools import cached_property

from celery import Task, shared_task

from scheduling.pass_cache import PassMemory
from scheduling.passes import passes_due, run_pass


class PassTask(Task):
    """The pass task's class. Celery makes one instance of a task per worker process and keeps
    it (its documented place for a process's resources), so its ``memory`` is what that
    process's passes remember between them (``scheduling.pass_cache``)."""

    @cached_property
    def memory(self) -> PassMemory:
        return PassMemory()


@shared_task(name="scheduling.run_pass", base=PassTask, bind=True, ignore_result=True)
def run_scheduling_pass(self: PassTask, cluster_id: int) -> str:
    """One pass for one cluster; returns "skipped" when another worker holds the cluster's pass."""
    return run_pass(cluster_id=cluster_id, memory=self.memory).status


@shared_task(name="scheduling.schedule_passes", ignore_result=True)
def schedule_passes() -> list[int]:
    due = passes_due()
    for cluster_id, interval_s in due:
        # A pass still queued when the next one is due is dropped rather than piling up.
        run_scheduling_pass.apply_async(args=[cluster_id], expires=max(interval_s, 5))
    return [cluster_id for cluster_id, _ in due]


@shared_task(name="scheduling.mirror_slurm_accounts", ignore_result=True)
def mirror_slurm_accounts(cluster_id: int) -> str:
    """Mirror the budget tree into one Slurm cluster's accounts if it changed (outside any pass)."""
    from scheduling.services.slurm_mirror import slurm_mirror_run

    return slurm_mirror_run(cluster_id=cluster_id)


@shared_task(name="scheduling.schedule_slurm_mirrors", ignore_result=True)
def schedule_slurm_mirrors() -> list[int]:
    """Beat: one mirror task per Slurm cluster; each costs a few queries when the tree is unchanged."""
    from scheduling.services.slurm_mirror import slurm_clusters

    clusters = slurm_clusters()
    for cluster_id in clusters:
        mirror_slurm_accounts.apply_async(args=[cluster_id], expires=60)
    return clusters
