"""Clusters and their nodes. Workloads, runs and passes join them with the live scheduler."""

from __future__ import annotations

from django.db import models


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
