"""Clusters and their nodes. Workloads, runs and passes join them with the live scheduler."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from scheduling.policy.types import GOODPUT


class BackendKind(models.TextChoices):
    SIMULATED = "simulated", "Simulated"
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"


class Cluster(models.Model):
    """One pool of GPU nodes scheduled as a unit, behind one backend."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    backend_kind = models.CharField(max_length=20, choices=BackendKind.choices, default=BackendKind.SIMULATED)
    backend_settings = models.JSONField(default=dict, blank=True)
    gpu_type = models.CharField(max_length=50, default="A100")
    window_days = models.PositiveIntegerField(default=7)
    min_runtime_cap_s = models.PositiveIntegerField(default=8 * 3600)
    pass_interval_s = models.PositiveIntegerField(default=10)
    created_at = models.DateTimeField(auto_now_add=True)
    # Preemption that weighs what it throws away, and the lane for short work (issue 17, DESIGN
    # 5.5 and 5.7; docs/policy.md "Preemption that weighs what it throws away"). The defaults are
    # ``scheduling.policy.types.GOODPUT``, the values the simulator measured; a site may change each.
    goodput_victims = models.BooleanField(
        default=GOODPUT["goodput_victims"],
        help_text="Victims lose the least work: idle interactive sessions first, then the work "
        "that checkpointed most recently.",
    )
    end_work_margin = models.FloatField(
        default=GOODPUT["end_work_margin"],
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Ending funded work that is not resumable needs the preemptor's allocation at "
        "most (1 - this) of its share (0: always allowed; 1: only for an allocation that used nothing).",
    )
    max_loss_per_gpu_s = models.FloatField(
        null=True,
        blank=True,
        default=GOODPUT["max_loss_per_gpu_s"],
        validators=[MinValueValidator(0.0)],
        help_text="A resumable victim may lose at most this many seconds of each GPU's work since its "
        "last checkpoint, and only to serve an allocation under its share; one further from its "
        "checkpoint is left to save first (empty: any loss, for any allocation). Short work's "
        "victims may lose up to the short maximum runtime per GPU it gets, for any allocation.",
    )
    drain_release = models.BooleanField(
        default=GOODPUT["drain_release"],
        help_text="Reservations expect funded work back when its protection ends (the drain rule); "
        "off: they count on declared ends only.",
    )
    rebalance_hysteresis = models.FloatField(
        default=GOODPUT["rebalance_hysteresis"],
        validators=[MinValueValidator(0.0), MaxValueValidator(10.0)],
        help_text="A funded victim's usage/budget ratio must exceed the preemptor's by this "
        "factor (0: the rank rule alone), so two allocations near their shares do not churn.",
    )
    short_lane_fraction = models.FloatField(
        default=GOODPUT["short_lane_fraction"],
        validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Fraction of the healthy GPUs (rounded up) that work taking part of a node leaves "
        "free for short work (0: no lane).",
    )
    short_max_runtime_s = models.PositiveIntegerField(
        default=1800,
        validators=[MinValueValidator(60), MaxValueValidator(24 * 3600)],
        help_text="Short work: debug or interactive, or a declared maximum runtime at most this long; "
        "its victims may lose this much work per GPU it gets.",
    )
    short_max_gpus = models.PositiveIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(64)],
        help_text="... on at most this many GPUs.",
    )
    preemption_grace_s = models.PositiveIntegerField(
        default=60,
        validators=[MaxValueValidator(3600)],
        help_text="Seconds between the termination signal of a preempted job and its kill or requeue.",
    )
    session_renewals_per_day = models.PositiveIntegerField(
        default=2,
        validators=[MaxValueValidator(24)],
        help_text="How many times a busy interactive session may renew its protection per 24 hours.",
    )
    session_warning_min = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(240)],
        help_text="Minutes before an interactive session's protection ends that its owner is told.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A machine with N GPUs of one GPU type, in a topology domain."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=100)
    gpus = models.PositiveIntegerField()
    gpu_type = models.CharField(max_length=50)
    topology_domain = models.CharField(max_length=100, default="default")
    healthy = models.BooleanField(default=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="node_name_unique_in_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.cluster.slug}/{self.name}"


# --- Workloads and their runs -----------------------------------------------------------------------


class WorkloadState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    PREEMPTED = "preempted", "Preempted"  # terminal: preempted and not resumable
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATES = frozenset(
    {WorkloadState.PREEMPTED, WorkloadState.COMPLETED, WorkloadState.FAILED, WorkloadState.CANCELLED}
)

# The state machine. Resumable work that is preempted (or loses its node) goes back to pending.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    WorkloadState.PENDING: frozenset({WorkloadState.RUNNING, WorkloadState.CANCELLED, WorkloadState.FAILED}),
    WorkloadState.RUNNING: frozenset(
        {
            WorkloadState.PENDING,
            WorkloadState.PREEMPTED,
            WorkloadState.COMPLETED,
            WorkloadState.FAILED,
            WorkloadState.CANCELLED,
        }
    ),
}


class WorkloadClass(models.TextChoices):
    DEBUG = "debug", "Debug"
    INTERACTIVE = "interactive", "Interactive"
    BATCH = "batch", "Batch"


class WorkloadSource(models.TextChoices):
    API = "api", "Portal API"
    NATIVE = "native", "Adopted from the backend"


class Workload(models.Model):
    """A request for GPUs charged to an allocation (a budget node) on one cluster.

    ``attempt`` counts starts: attempt N is the Nth contiguous run. ``queued_at`` is when the
    workload last became pending (submit, or requeue after preemption): waits are measured from it.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="workloads")
    allocation = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.PROTECT, related_name="workloads"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="workloads"
    )
    user_name = models.CharField(max_length=150)  # the owner's username, or the backend's user
    name = models.CharField(max_length=200, blank=True)
    workload_class = models.CharField(
        max_length=20, choices=WorkloadClass.choices, default=WorkloadClass.BATCH
    )
    gpus = models.PositiveIntegerField()
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    gpu_type = models.CharField(max_length=50, blank=True)
    min_runtime_s = models.PositiveIntegerField(default=0)  # clipped to the cluster's cap
    min_runtime_requested_s = models.PositiveIntegerField(default=0)
    resumable = models.BooleanField(default=False)
    max_runtime_s = models.PositiveIntegerField(null=True, blank=True)
    # How often resumable work saves progress (DESIGN 2): a preemption loses the time since the last one.
    checkpoint_interval_s = models.PositiveIntegerField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)  # command / image: opaque to the portal
    source = models.CharField(max_length=10, choices=WorkloadSource.choices, default=WorkloadSource.API)
    state = models.CharField(max_length=20, choices=WorkloadState.choices, default=WorkloadState.PENDING)
    state_changed_at = models.DateTimeField()
    submitted_at = models.DateTimeField()
    queued_at = models.DateTimeField()
    first_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    requeue_count = models.PositiveIntegerField(default=0)
    backend_ref = models.CharField(max_length=200, blank=True)
    held = models.BooleanField(default=False)
    held_by = models.CharField(max_length=150, blank=True)
    held_at = models.DateTimeField(null=True, blank=True)
    held_note = models.CharField(max_length=500, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "state"], name="workload_cluster_state"),
            models.Index(fields=["cluster", "backend_ref"], name="workload_cluster_ref"),
            models.Index(fields=["allocation", "state"], name="workload_allocation_state"),
            models.Index(fields=["user_name", "state"], name="workload_user_state"),  # home pages
        ]

    def __str__(self) -> str:
        return f"workload {self.pk} ({self.state})"

    @property
    def allocation_path(self) -> str:
        return self.allocation.path if self.allocation is not None else ""


class ProtectionRenewal(models.Model):
    """A busy interactive session renewed its protection (issue 17 point 4): at most the cluster's
    ``session_renewals_per_day`` per workload in any 24 hours (``scheduling.services.renewals``)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="renewals")
    run = models.ForeignKey("Run", on_delete=models.CASCADE, related_name="renewals")
    at = models.DateTimeField()
    actor = models.CharField(max_length=150)
    protected_before = models.DateTimeField()
    protected_until = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["workload", "at"], name="renewal_workload_at")]

    def __str__(self) -> str:
        return f"renewal of {self.workload_id} at {self.at}"


class EndReason(models.TextChoices):
    COMPLETED = "completed", "Completed"
    PREEMPTED = "preempted", "Preempted"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    NODE_FAILURE = "node_failure", "Node failure"


class Run(models.Model):
    """One contiguous slice of a workload on nodes. Open while ``ended_at`` is null.

    ``wait_s`` is the wait before this run: submit -> first start for attempt 1, requeue -> restart
    after. Allocation and funding are copied at start so accounting never joins back to workloads.
    """

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="runs")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="runs")
    allocation = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    user_name = models.CharField(max_length=150)
    attempt = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField()
    placement = models.JSONField(default=list)  # [[node, gpus], ...]
    funded = models.BooleanField(default=True)
    started_at = models.DateTimeField()
    protected_until = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=20, choices=EndReason.choices, blank=True)
    wait_s = models.FloatField(default=0.0)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "attempt"], name="one_run_per_workload_attempt")
        ]
        indexes = [
            models.Index(fields=["cluster", "ended_at"], name="run_cluster_ended"),
            models.Index(fields=["cluster", "started_at"], name="run_cluster_started"),
        ]

    def __str__(self) -> str:
        return f"run {self.workload_id}#{self.attempt}"


# --- Scheduling passes ---------------------------------------------------------------------------------


def _nonce() -> str:
    return uuid.uuid4().hex


class PassStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    BACKEND_UNAVAILABLE = "backend_unavailable", "Backend unavailable"
    FAILED = "failed", "Failed"


class SchedulingPass(models.Model):
    """One pass over one cluster: how long each numbered phase took and what it did."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="passes")
    nonce = models.CharField(
        max_length=32, default=_nonce, editable=False
    )  # tells passes apart across databases
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=30, choices=PassStatus.choices, default=PassStatus.RUNNING)
    error = models.TextField(blank=True)
    reconcile_ms = models.FloatField(default=0.0)
    snapshot_ms = models.FloatField(default=0.0)
    plan_ms = models.FloatField(default=0.0)
    persist_ms = models.FloatField(default=0.0)
    dispatch_ms = models.FloatField(default=0.0)
    total_ms = models.FloatField(default=0.0)
    rollups_ms = models.FloatField(null=True, blank=True)  # the pages' fold after commit, outside total_ms
    plan_timings_ms = models.JSONField(default=dict, blank=True)  # the policy's own phases
    fair_share = models.JSONField(default=dict, blank=True)  # allocation path -> fair-share ratio
    pending_count = models.PositiveIntegerField(default=0)
    running_count = models.PositiveIntegerField(default=0)
    started_count = models.PositiveIntegerField(default=0)
    preempted_count = models.PositiveIntegerField(default=0)
    reserved_count = models.PositiveIntegerField(default=0)
    runs_opened = models.PositiveIntegerField(default=0)
    runs_closed = models.PositiveIntegerField(default=0)
    adopted_count = models.PositiveIntegerField(default=0)
    reasons_written = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["cluster", "-started_at"], name="pass_cluster_started")]

    def __str__(self) -> str:
        return f"pass {self.pk} on {self.cluster_id} ({self.status})"


class PassLease(models.Model):
    """Per-cluster bookkeeping for passes: the SQLite lease and the accounting watermark.

    On PostgreSQL the pass is claimed with ``pg_try_advisory_lock``; elsewhere with a conditional
    UPDATE of ``holder``/``expires_at`` here. ``accounted_until`` / ``owed_until`` are how far used and
    owed GPU-seconds have been charged into AllocationHour; ``last_sample_at`` throttles utilisation
    samples. ``accounts_digest`` is the digest of the account tree last mirrored into the backend
    (Slurm), so the pass calls sacctmgr only when the budget tree or its members changed.
    """

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, primary_key=True, related_name="lease")
    holder = models.CharField(max_length=100, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    accounted_until = models.DateTimeField(null=True, blank=True)
    owed_until = models.DateTimeField(null=True, blank=True)
    last_sample_at = models.DateTimeField(null=True, blank=True)
    accounts_digest = models.CharField(max_length=64, blank=True)
    # The window usage the latest pass ranked by, per allocation id and per (allocation id, user), as
    # of ``accounted_until``: pages that re-plan (start options) read it instead of summing the hours.
    standing = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"lease for cluster {self.cluster_id}"


class DecisionKind(models.TextChoices):
    START = "start", "Start"
    PREEMPT = "preempt", "Preempt"
    RESERVE = "reserve", "Reserve"
    CANCEL = "cancel", "Cancel"


class Decision(models.Model):
    """What a pass decided (or a user asked, for cancel), written before it is pushed to the backend.

    ``dispatched_at`` is set once the backend accepted it. An undispatched start/preempt from an
    earlier pass is ``superseded`` by the next pass, which re-plans from what the backend reports;
    undispatched cancels are sent again until the backend takes them.
    """

    scheduling_pass = models.ForeignKey(
        SchedulingPass, null=True, blank=True, on_delete=models.CASCADE, related_name="decisions"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="decisions")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="decisions")
    kind = models.CharField(max_length=10, choices=DecisionKind.choices)
    attempt = models.PositiveIntegerField(default=0)
    placement = models.JSONField(default=list, blank=True)  # start: [[node, gpus]]; reserve: [[node, 0]]
    requeue = models.BooleanField(default=False)
    protected_until = models.DateTimeField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)  # reserve: when the nodes are expected free
    funded = models.BooleanField(default=True)
    preemptor = models.ForeignKey(
        Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()
    dispatched_at = models.DateTimeField(null=True, blank=True)
    superseded = models.BooleanField(default=False)
    # A preemption dispatched with a grace period (the backend signalled the job and kills or
    # requeues it later): when that is due, and when the backend did it. Null: nothing to finish.
    grace_until = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "dispatched_at"], name="decision_cluster_dispatched"),
            models.Index(fields=["workload", "kind", "attempt"], name="decision_workload_kind"),
            models.Index(
                fields=["cluster"],
                condition=models.Q(grace_until__isnull=False, finished_at__isnull=True),
                name="decision_in_grace",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.workload_id}#{self.attempt}"


class PendingReason(models.Model):
    """The latest answer to "why is this not running" for a pending workload (DESIGN 6).

    Only the pass writes these (persist phase): a row whose workload left the queue is removed by
    the next pass, so read them for workloads in state pending.
    """

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, primary_key=True, related_name="pending_reason"
    )
    code = models.CharField(max_length=40)
    params = models.JSONField(default=dict, blank=True)
    message = models.TextField()
    position = models.PositiveIntegerField(null=True, blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.workload_id}: {self.code}"


# --- Accounting rollups -----------------------------------------------------------------------------------


class AllocationHour(models.Model):
    """Hourly rollup per (allocation, cluster), maintained incrementally by every pass.

    - ``used_gpu_s``: GPU-seconds run by workloads charged to this budget node (funded or not);
      the sliding-window usage is the sum of these plus open runs since ``PassLease.accounted_until``.
    - ``delivered_gpu_s``: the part run by funded workloads (DESIGN 2 "delivered").
    - ``owed_gpu_s``: integral of min(entitlement, demand) over the hour, demand being the GPUs its own
      funded pending + running workloads asked for (DESIGN 2 "owed").
    ``allocation`` is null for work charged to no budget node (adopted jobs with unknown accounts).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="allocation_hours")
    allocation = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.CASCADE, related_name="hours"
    )
    hour = models.DateTimeField()  # the start of the hour, UTC
    used_gpu_s = models.FloatField(default=0.0)
    delivered_gpu_s = models.FloatField(default=0.0)
    owed_gpu_s = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster_id", "hour", "allocation_id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "allocation", "hour"], name="one_hour_per_allocation")
        ]
        indexes = [models.Index(fields=["cluster", "hour"], name="allocation_hour_cluster_hour")]

    def __str__(self) -> str:
        return f"{self.allocation_id}@{self.cluster_id} {self.hour:%Y-%m-%d %H}:00"


class UserHour(models.Model):
    """Hourly GPU-seconds per (cluster, allocation, user), folded by the same code as AllocationHour.

    The fair-share order inside an allocation ranks users by their usage in the window; this is the
    rollup it is read from, so a pass never scans the runs of the window. ``used_gpu_s`` counts funded
    and unfunded work alike, exactly as ``AllocationHour.used_gpu_s`` does.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="user_hours")
    allocation = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.CASCADE, related_name="user_hours"
    )
    user_name = models.CharField(max_length=150)
    hour = models.DateTimeField()  # the start of the hour, UTC
    used_gpu_s = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster_id", "hour", "allocation_id", "user_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "allocation", "user_name", "hour"], name="one_hour_per_allocation_user"
            )
        ]
        indexes = [models.Index(fields=["cluster", "hour"], name="user_hour_cluster_hour")]

    def __str__(self) -> str:
        return f"{self.user_name}/{self.allocation_id}@{self.cluster_id} {self.hour:%Y-%m-%d %H}:00"


class UtilisationSample(models.Model):
    """Mean GPU busy % of a running workload as the backend reported it (DCGM-style telemetry)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="utilisation_samples")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="utilisation_samples")
    at = models.DateTimeField()
    gpus = models.PositiveIntegerField()
    gpu_utilisation = models.FloatField()  # 0..100

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["cluster", "at"], name="utilisation_cluster_at")]

    def __str__(self) -> str:
        return f"{self.workload_id} {self.gpu_utilisation:.0f}% at {self.at}"


# --- The simulated backend's own state (shared by web, worker and beat through the database) ---------


class SimulatedNode(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="simulated_nodes")
    name = models.CharField(max_length=100)
    gpus = models.PositiveIntegerField()
    gpu_type = models.CharField(max_length=50)
    domain = models.CharField(max_length=100, default="default")
    healthy = models.BooleanField(default=True)
    reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="simulated_node_unique")]

    def __str__(self) -> str:
        return self.name


class SimulatedJob(models.Model):
    """A job in the simulated cluster. Rows exist once a job has started; waiting jobs need none.

    It runs for ``duration_s`` and then completes, or fails at ``fail_after_s`` when that is set.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="simulated_jobs")
    ref = models.CharField(max_length=100)
    workload_id = models.BigIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=20)  # a backends.base.JobState value
    placement = models.JSONField(default=list)
    gpus = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(default=3600.0)
    fail_after_s = models.FloatField(null=True, blank=True)
    utilisation = models.FloatField(default=90.0)
    started_at = models.FloatField(null=True, blank=True)
    ended_at = models.FloatField(null=True, blank=True)
    ran_s = models.FloatField(default=0.0)  # work done by earlier attempts (resumable jobs continue)
    # Natively submitted jobs carry what the portal needs to adopt them:
    account = models.CharField(max_length=1000, blank=True)
    user = models.CharField(max_length=150, blank=True)
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    min_runtime_s = models.FloatField(null=True, blank=True)
    resumable = models.BooleanField(null=True, blank=True)
    name = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["cluster_id", "id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "ref"], name="simulated_job_unique")]
        indexes = [models.Index(fields=["cluster", "state"], name="simulated_job_state")]

    def __str__(self) -> str:
        return self.ref
