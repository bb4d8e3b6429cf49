"""Hourly rollups the pages read (DESIGN 8), so no page ever scans the raw history.

``scheduling.AllocationHour`` already holds used / delivered / owed per allocation. These add what
it lacks: cluster health and telemetry per hour, waits per class, where pending time went, pass
durations. :mod:`portal.rollups` folds new passes, runs and samples into them incrementally.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

# Wait-time histogram edges in seconds; the last bin is open-ended (see portal.metrics.percentile).
WAIT_EDGES_S: tuple[float, ...] = (
    0,
    5,
    15,
    30,
    60,
    120,
    300,
    600,
    1200,
    1800,
    3600,
    7200,
    14400,
    28800,
    57600,
    86400,
    172800,
    345600,
)


class ClusterHour(models.Model):
    """One cluster's hour: GPU-seconds installed and healthy, telemetry, preemptions, pass timings."""

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="metric_hours")
    hour = models.DateTimeField()
    installed_gpu_s = models.FloatField(default=0.0)
    healthy_gpu_s = models.FloatField(default=0.0)
    busy_gpus = models.FloatField(default=0.0)  # sum over samples of gpus x busy fraction
    sampled_gpus = models.FloatField(default=0.0)  # sum over samples of gpus
    preemptions = models.PositiveIntegerField(default=0)
    requeues = models.PositiveIntegerField(default=0)
    lost_gpu_s = models.FloatField(default=0.0)  # GPU-seconds of preempted non-resumable runs
    pass_count = models.PositiveIntegerField(default=0)
    pass_total_ms = models.FloatField(default=0.0)
    pass_max_ms = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster_id", "hour"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hour"], name="one_metric_hour_per_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.hour:%Y-%m-%d %H}:00"


# One integer column per histogram bin, so a 90-day view sums them per day in the database.
WAIT_BIN_FIELDS: tuple[str, ...] = tuple(f"bin_{index:02d}" for index in range(len(WAIT_EDGES_S)))


class WaitHour(models.Model):
    """Waits of the runs that started in one hour, per cluster and workload class, as a histogram:
    ``bin_NN`` counts the waits in [WAIT_EDGES_S[NN], WAIT_EDGES_S[NN + 1])."""

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="wait_hours")
    workload_class = models.CharField(max_length=20)
    hour = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)
    total_wait_s = models.FloatField(default=0.0)
    for _field in WAIT_BIN_FIELDS:
        locals()[_field] = models.PositiveIntegerField(default=0)
    del _field

    class Meta:
        ordering = ["cluster_id", "hour", "workload_class"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "workload_class", "hour"], name="one_wait_hour_per_class"
            )
        ]
        indexes = [models.Index(fields=["cluster", "hour"], name="wait_hour_cluster_hour")]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.workload_class} {self.hour:%Y-%m-%d %H}:00"

    @property
    def histogram(self) -> list[int]:
        return [getattr(self, name) for name in WAIT_BIN_FIELDS]

    def add_wait(self, wait_s: float, bin_index: int) -> None:
        name = WAIT_BIN_FIELDS[bin_index]
        setattr(self, name, getattr(self, name) + 1)
        self.count += 1
        self.total_wait_s += wait_s


class PendingCause(models.TextChoices):
    WAITING = "waiting", "Waiting behind others"
    FRAGMENTATION = "fragmentation", "Fragmentation"
    PREEMPTION = "preemption", "Preemption"
    UNHEALTHY = "unhealthy", "Unhealthy nodes"
    OTHER = "other", "Held, limits or unfunded"


class PendingDay(models.Model):
    """GPU-seconds an allocation's funded work spent pending for each cause in one UTC day
    (preemption: GPU-seconds of its preempted runs' lost work). Daily: the delivery page only ever
    sums it over 7 to 90 days, and 90 days x 200 allocations x 5 causes stays small."""

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="pending_days")
    allocation = models.ForeignKey(
        "budgets.BudgetNode", on_delete=models.CASCADE, related_name="pending_days"
    )
    day = models.DateTimeField()  # midnight UTC
    cause = models.CharField(max_length=20, choices=PendingCause.choices)
    gpu_s = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster_id", "day"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "allocation", "day", "cause"], name="one_pending_day")
        ]
        indexes = [models.Index(fields=["cluster", "day"], name="pending_day_cluster_day")]

    def __str__(self) -> str:
        return f"{self.allocation_id} {self.cause} {self.day:%Y-%m-%d}"


class ReasonChange(models.Model):
    """A pending workload's reason code changed (the history behind "why is my job pending?").

    ``PendingReason`` keeps only the latest answer; the fold records each new code with the
    sentence it came with, so the workload page can show how the answer evolved.
    """

    workload = models.ForeignKey(
        "scheduling.Workload", on_delete=models.CASCADE, related_name="reason_changes"
    )
    at = models.DateTimeField()
    code = models.CharField(max_length=40)
    message = models.TextField()

    class Meta:
        ordering = ["workload_id", "-at", "-id"]
        indexes = [models.Index(fields=["workload", "-at"], name="reason_change_workload_at")]

    def __str__(self) -> str:
        return f"{self.workload_id} {self.code} at {self.at}"


class RollupWatermark(models.Model):
    """How far each cluster's history has been folded into the rollups above."""

    cluster = models.OneToOneField(
        "scheduling.Cluster", on_delete=models.CASCADE, primary_key=True, related_name="rollup_watermark"
    )
    sampled_at = models.DateTimeField(null=True, blank=True)
    last_run_id = models.BigIntegerField(default=0)
    last_pass_id = models.BigIntegerField(default=0)
    last_utilisation_id = models.BigIntegerField(default=0)
    preempted_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"rollups of {self.cluster_id} at {self.sampled_at}"


class WhatIfStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class WhatIfRun(models.Model):
    """One what-if simulation: recorded workloads replayed with edited budgets (budgets.whatif)."""

    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="whatif_runs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    days = models.PositiveIntegerField(default=14)
    budgets = models.JSONField(default=dict)  # node path -> edited GPUs
    status = models.CharField(max_length=10, choices=WhatIfStatus.choices, default=WhatIfStatus.QUEUED)
    progress = models.FloatField(default=0.0)  # 0..1
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"what-if {self.pk} ({self.status})"


class ApiToken(models.Model):
    """A named API token of one user. Only a SHA-256 digest of the secret is stored (``portal.tokens``).

    ``prefix`` (the secret's first characters, not secret on its own) finds the row and names the
    token in lists; a revoked or expired token authenticates nobody but stays listed.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} {self.name} ({self.prefix}…)"
