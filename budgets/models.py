"""The budget tree: nodes, their allocations per cluster, the append-only history and memberships."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class BudgetNode(models.Model):
    """One node of the budget tree (org > program > team > project, any depth).

    ``path`` is the slug path from the root (``ai2/nlp/olmo``); it names the node as an
    allocation everywhere (API, Slurm accounts, simulator traces) and is kept in step by the
    services on rename and move.
    """

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    path = models.CharField(max_length=1000, unique=True)
    archived = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return self.path


class Allocation(models.Model):
    """A budget node's budget on one cluster, in GPUs (GPU-hours per hour of wall time)."""

    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="allocations")
    cluster = models.ForeignKey("scheduling.Cluster", on_delete=models.CASCADE, related_name="allocations")
    gpus = models.DecimalField(max_digits=10, decimal_places=2, default=0)
    effective_from = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster_id", "node__path"]
        constraints = [
            models.UniqueConstraint(fields=["node", "cluster"], name="one_allocation_per_node_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.node.path}@{self.cluster.slug}: {self.gpus}"


class BudgetChange(models.Model):
    """Append-only history of the budget tree: who changed what, when, from what to what, and why."""

    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="changes")
    cluster = models.ForeignKey("scheduling.Cluster", null=True, blank=True, on_delete=models.CASCADE)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)
    field = models.CharField(max_length=50)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.node.path} {self.field}: {self.old_value} -> {self.new_value}"


class Role(models.TextChoices):
    MANAGER = "manager", "Manager"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class Membership(models.Model):
    """A user's role on a budget node; it applies to the node's whole subtree."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)

    class Meta:
        ordering = ["node__path", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "node"], name="one_membership_per_user_node")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.node.path}"
