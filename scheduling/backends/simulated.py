"""The simulated backend: a GPU cluster kept in the database, so web, worker and beat share it.

Time comes from an injected clock (seconds since the epoch). Jobs run for their duration and then
complete, or fail at ``fail_after_s``; a node made unhealthy ends the jobs on it (NODE_FAILURE).
Waiting jobs submitted through the portal need no row: a row appears when a job first starts.
Natively submitted jobs (no workload id) are rows in state WAITING, which the pass adopts.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable

from django.db import transaction
from django.db.models import F, Q

from scheduling.backends.base import (
    Action,
    ActionsRefused,
    BackendUnavailable,
    CancelAction,
    ClusterState,
    JobState,
    ObservedJob,
    ObservedNode,
    PreemptAction,
    StartAction,
    SubmitRequest,
)
from scheduling.bulk import update_rows
from scheduling.models import Cluster, Node, SimulatedJob, SimulatedNode, Workload

ENDED_RETENTION_S = 3600.0  # ended jobs are reported this long, so a pass that crashed still sees them
ENDED_STATES = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.NODE_FAILURE)
DEFAULT_DURATION_S = 3600.0
OBSERVED_FIELDS = (
    "ref", "state", "workload_id", "attempt", "placement", "started_at", "ended_at", "account", "user", "gpus",
    "gpus_per_node", "min_runtime_s", "resumable", "name", "utilisation",
)  # fmt: skip


def simulated_nodes_seed(*, cluster: Cluster) -> int:
    """Create the simulated machines once: from the cluster's Node rows, else from backend_settings
    ``{"nodes": 125, "gpus_per_node": 8, "nodes_per_domain": 16}``."""
    if SimulatedNode.objects.filter(cluster=cluster).exists():
        return 0
    rows = [
        SimulatedNode(
            cluster=cluster, name=n.name, gpus=n.gpus, gpu_type=n.gpu_type, domain=n.topology_domain
        )
        for n in Node.objects.filter(cluster=cluster)
    ]
    if not rows:
        count = int(cluster.backend_settings.get("nodes", 0))
        size = int(cluster.backend_settings.get("gpus_per_node", 8))
        per_domain = int(cluster.backend_settings.get("nodes_per_domain", 16))
        rows = [
            SimulatedNode(
                cluster=cluster,
                name=f"{cluster.slug}-{i:04d}",
                gpus=size,
                gpu_type=cluster.gpu_type,
                domain=f"rack-{i // per_domain:02d}",
            )
            for i in range(count)
        ]
    SimulatedNode.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def simulated_node_set_health(*, cluster: Cluster, name: str, healthy: bool, reason: str = "") -> None:
    SimulatedNode.objects.filter(cluster=cluster, name=name).update(healthy=healthy, reason=reason)


def simulated_native_submit(
    *,
    cluster: Cluster,
    ref: str,
    account: str,
    user: str,
    gpus: int,
    duration_s: float,
    min_runtime_s: float = 0.0,
    resumable: bool = False,
    name: str = "",
) -> SimulatedJob:
    """A job submitted straight to the simulated cluster, bypassing the portal (to be adopted)."""
    return SimulatedJob.objects.create(
        cluster=cluster,
        ref=ref,
        state=JobState.WAITING,
        gpus=gpus,
        duration_s=duration_s,
        account=account,
        user=user,
        min_runtime_s=min_runtime_s,
        resumable=resumable,
        name=name,
    )


def _utilisation_for(workload_id: int | None, metadata: dict) -> float:
    """Busy % a job reports: from its metadata when given, else a stable per-workload value."""
    if "utilisation" in metadata:
        return float(metadata["utilisation"])
    spread = zlib.crc32(str(workload_id).encode()) % 100
    return 5.0 + spread * 0.1 if spread < 8 else 60.0 + spread * 0.38  # a few squatters idle near 5-6%


class SimulatedBackend:
    """Implements scheduling.backends.base.Backend over the SimulatedNode / SimulatedJob tables."""

    name = "simulated cluster"

    def __init__(self, cluster: Cluster, *, clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self.clock = clock

    def _check_available(self, delay_key: str) -> dict:
        """``backend_settings`` knobs for tests and demos: ``unavailable`` and per-call delays in seconds."""
        query = Cluster.objects.filter(pk=self.cluster.pk).values_list("backend_settings", flat=True)
        settings = query.first() or {}
        if settings.get("unavailable"):
            raise BackendUnavailable(f"the simulated cluster {self.cluster.name} is switched off")
        if settings.get(delay_key):
            time.sleep(float(settings[delay_key]))
        return settings

    # --- observe ---------------------------------------------------------------------------------------

    def observe(self) -> ClusterState:
        self._check_available("observe_delay_s")
        simulated_nodes_seed(cluster=self.cluster)
        now = self.clock()
        nodes = tuple(
            ObservedNode(
                name=name, gpus=gpus, gpu_type=gpu_type, domain=domain, healthy=healthy, reason=reason
            )
            for name, gpus, gpu_type, domain, healthy, reason in SimulatedNode.objects.filter(
                cluster=self.cluster
            ).values_list("name", "gpus", "gpu_type", "domain", "healthy", "reason")
        )
        self._advance(now=now, unhealthy={node.name for node in nodes if not node.healthy})
        jobs = (
            SimulatedJob.objects.filter(cluster=self.cluster)
            .exclude(state__in=ENDED_STATES, ended_at__lt=now - ENDED_RETENTION_S)
            .values(*OBSERVED_FIELDS)
        )
        return ClusterState(observed_at=now, nodes=nodes, jobs=tuple(self._observed(job) for job in jobs))

    def _advance(self, *, now: float, unhealthy: set[str]) -> None:
        """Move running jobs on: done -> COMPLETED, failing -> FAILED, on a sick node -> NODE_FAILURE."""
        changed = []
        running = SimulatedJob.objects.filter(cluster=self.cluster, state=JobState.RUNNING)
        if not unhealthy:  # only jobs whose end (or failure) time has passed can change
            running = running.alias(done_at=F("started_at") + F("duration_s") - F("ran_s")).filter(
                Q(done_at__lte=now) | Q(fail_after_s__isnull=False)
            )
        for job in running:
            ends = self._ending(job, now=now, unhealthy=unhealthy)
            if ends is not None:
                job.state, job.ended_at = ends
                changed.append(job)
        update_rows(SimulatedJob, changed, ["state", "ended_at"])

    @staticmethod
    def _ending(job: SimulatedJob, *, now: float, unhealthy: set[str]) -> tuple[str, float] | None:
        if any(node in unhealthy for node, _ in job.placement):
            return JobState.NODE_FAILURE, now
        started = job.started_at or now
        if job.fail_after_s is not None and started + job.fail_after_s - job.ran_s <= now:
            return JobState.FAILED, started + max(job.fail_after_s - job.ran_s, 0.0)
        done_at = started + max(job.duration_s - job.ran_s, 0.0)
        return (JobState.COMPLETED, done_at) if done_at <= now else None

    def _observed(self, job: dict) -> ObservedJob:
        jitter = (zlib.crc32(f"{job['ref']}:{int(self.clock() // 60)}".encode()) % 11) - 5
        running = job["state"] == JobState.RUNNING
        utilisation = job.pop("utilisation")
        placement = job.pop("placement")
        job["state"] = JobState(job["state"])
        return ObservedJob(
            **job, nodes=tuple(node for node, _ in placement),
            gpu_utilisation=min(max(utilisation + jitter, 0.0), 100.0) if running else None,
        )  # fmt: skip

    # --- apply -------------------------------------------------------------------------------------------

    def apply(self, actions: list[Action]) -> None:
        settings = self._check_available("apply_delay_s")
        # ``refuse_starts``: workload ids whose start this cluster refuses (a test knob, as Slurm
        # refuses an scontrol it cannot do); every other action is applied.
        refusing = {int(wid) for wid in settings.get("refuse_starts", ())}
        refused = {
            action.workload_id: f"the simulated cluster {self.cluster.name} refuses to start it"
            for action in actions
            if isinstance(action, StartAction) and action.workload_id in refusing
        }
        with transaction.atomic():
            self._apply([action for action in actions if action.workload_id not in refused])
        if refused:
            raise ActionsRefused(refused)

    def _apply(self, actions: list[Action]) -> None:
        now = self.clock()
        for action in actions:
            if isinstance(action, StartAction):
                self._start(action, now=now)
            elif isinstance(action, PreemptAction):
                self._preempt(action, now=now)
            elif isinstance(action, CancelAction):
                self._cancel(action, now=now)

    def _job_for(self, workload_id: int, ref: str) -> SimulatedJob:
        job = SimulatedJob.objects.select_for_update().filter(cluster=self.cluster, ref=ref).first()
        if job is not None:
            return job
        workload = Workload.objects.get(pk=workload_id)
        metadata = workload.metadata or {}
        duration = metadata.get("duration_s") or workload.max_runtime_s or DEFAULT_DURATION_S
        return SimulatedJob(
            cluster=self.cluster,
            ref=ref,
            workload_id=workload_id,
            state=JobState.WAITING,
            gpus=workload.gpus,
            duration_s=float(duration),
            fail_after_s=metadata.get("fail_after_s"),
            utilisation=_utilisation_for(workload_id, metadata),
            account=workload.allocation_path,
            user=workload.user_name,
            resumable=workload.resumable,
            name=workload.name,
        )

    def _start(self, action: StartAction, *, now: float) -> None:
        job = self._job_for(action.workload_id, action.ref)
        restartable = job.state == JobState.WAITING or (job.state == JobState.NODE_FAILURE and job.resumable)
        if not restartable or job.attempt >= action.attempt:
            return  # already started for this attempt, or ended for good: idempotent
        job.workload_id = action.workload_id
        job.attempt, job.state, job.started_at, job.ended_at = action.attempt, JobState.RUNNING, now, None
        job.placement = [list(piece) for piece in action.placement]
        job.save()

    def _preempt(self, action: PreemptAction, *, now: float) -> None:
        job = SimulatedJob.objects.select_for_update().filter(cluster=self.cluster, ref=action.ref).first()
        if job is None or job.state != JobState.RUNNING or job.attempt != action.attempt:
            return
        if action.requeue:
            job.ran_s += now - (job.started_at or now)
            job.state, job.placement, job.started_at = JobState.WAITING, [], None
        else:
            job.state, job.ended_at = JobState.CANCELLED, now
        job.save()

    def _cancel(self, action: CancelAction, *, now: float) -> None:
        updated = (
            SimulatedJob.objects.filter(cluster=self.cluster, ref=action.ref)
            .exclude(state__in=ENDED_STATES)
            .update(state=JobState.CANCELLED, ended_at=now)
        )
        if not updated and not SimulatedJob.objects.filter(cluster=self.cluster, ref=action.ref).exists():
            SimulatedJob.objects.create(
                cluster=self.cluster,
                ref=action.ref,
                workload_id=action.workload_id,
                state=JobState.CANCELLED,
                ended_at=now,
            )

    # --- submit ------------------------------------------------------------------------------------------

    def submit(self, request: SubmitRequest) -> str:
        """Waiting jobs live in the portal's queue until started; the ref is all the simulator needs."""
        return f"sim-{request.workload_id}"
