"""API shapes of the budget tree. Write serializers only parse; the services hold the rules."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from rest_framework import serializers

from budgets import access
from budgets.models import Allocation, BudgetChange, BudgetNode
from scheduling.models import Cluster


class BudgetNodeSerializer(serializers.ModelSerializer):
    can_edit = serializers.SerializerMethodField(help_text="May the caller rename, move, archive or fund it?")
    can_add_child = serializers.SerializerMethodField(help_text="May the caller create children under it?")

    class Meta:
        model = BudgetNode
        fields = [
            "id",
            "name",
            "slug",
            "path",
            "parent",
            "archived",
            "created_at",
            "can_edit",
            "can_add_child",
        ]
        read_only_fields = fields

    def get_can_edit(self, node: BudgetNode) -> bool:
        return access.can_edit(self.context["request"].user, node, memberships=self._memberships())

    def get_can_add_child(self, node: BudgetNode) -> bool:
        return access.can_add_child(self.context["request"].user, node, memberships=self._memberships())

    def _memberships(self) -> dict[str, str]:
        """One memberships query per request, however many nodes are serialized."""
        context = cast(dict[str, Any], self.context)  # DRF passes a dict; the stubs say Mapping
        if "memberships" not in context:
            context["memberships"] = access.memberships_by_path(context["request"].user)
        return context["memberships"]


class BudgetNodeCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    parent = serializers.IntegerField(  # type: ignore[assignment]  # the API's field, not Field.parent
        allow_null=True, help_text="Id of the parent node; null for a root (staff only)."
    )


class BudgetNodeUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False, help_text="Rename the node.")
    parent = serializers.IntegerField(  # type: ignore[assignment]  # the API's field, not Field.parent
        required=False, help_text="Move the node (and its subtree) under this node."
    )


class ArchiveSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class ArchiveResultSerializer(serializers.Serializer):
    archived = serializers.IntegerField(
        help_text="How many nodes were archived (the node and its live subtree)."
    )


class AllocationSerializer(serializers.ModelSerializer):
    node_path = serializers.CharField(source="node.path", read_only=True)
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = Allocation
        fields = ["id", "node", "node_path", "cluster", "gpus", "effective_from", "updated_at"]
        read_only_fields = fields


class AllocationSetSerializer(serializers.Serializer):
    node = serializers.IntegerField(help_text="Id of the budget node to fund.")
    cluster = serializers.SlugField(help_text="Slug of the cluster, e.g. main.")
    gpus = serializers.CharField(max_length=20, help_text="GPUs, >= 0, at most two decimals.")
    reason = serializers.CharField(
        max_length=500, allow_blank=True, help_text="Why the budget changes (required)."
    )


class AllocationUpdateSerializer(serializers.Serializer):
    gpus = serializers.CharField(max_length=20, help_text="GPUs, >= 0, at most two decimals.")
    reason = serializers.CharField(
        max_length=500, allow_blank=True, help_text="Why the budget changes (required)."
    )


class BudgetChangeSerializer(serializers.ModelSerializer):
    node_path = serializers.CharField(source="node.path", read_only=True)
    actor: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="null for the system or a deleted user",
    )
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True, help_text="null for structural changes"
    )

    class Meta:
        model = BudgetChange
        fields = [
            "id",
            "node",
            "node_path",
            "cluster",
            "actor",
            "at",
            "field",
            "old_value",
            "new_value",
            "reason",
        ]
        read_only_fields = fields


class TreeRowSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="node.pk")
    name = serializers.CharField(source="node.name")
    path = serializers.CharField(source="node.path")
    parent = serializers.IntegerField(source="node.parent_id", allow_null=True)  # type: ignore[assignment]  # the API's field, not Field.parent
    depth = serializers.IntegerField()
    gpus = serializers.DecimalField(max_digits=12, decimal_places=2)
    share = serializers.DecimalField(
        max_digits=12, decimal_places=4, allow_null=True, help_text="gpus / parent's gpus"
    )
    entitlement = serializers.DecimalField(
        max_digits=12, decimal_places=2, help_text="GPUs after the chain of shares"
    )
    children_gpus = serializers.DecimalField(max_digits=12, decimal_places=2)
    overcommitted = serializers.BooleanField(help_text="The children hold more than this node")
    can_edit = serializers.BooleanField()
    can_add_child = serializers.BooleanField()


class BudgetTreeSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.slug")
    healthy_gpus = serializers.DecimalField(max_digits=12, decimal_places=2)
    allocated_gpus = serializers.DecimalField(max_digits=12, decimal_places=2)
    unallocated_gpus = serializers.DecimalField(max_digits=12, decimal_places=2)
    overcommitted = serializers.BooleanField()
    nodes = TreeRowSerializer(many=True, source="rows")


class ClusterSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)
    healthy_node_count = serializers.IntegerField(read_only=True)
    installed_gpus = serializers.IntegerField(read_only=True)
    healthy_gpus = serializers.IntegerField(read_only=True)

    class Meta:
        model = Cluster
        fields = [
            "id", "name", "slug", "backend_kind", "gpu_type", "window_days", "min_runtime_cap_s",
            "pass_interval_s", "node_count", "healthy_node_count", "installed_gpus", "healthy_gpus",
            "goodput_victims", "end_work_margin", "max_loss_per_gpu_s", "rebalance_hysteresis", "drain_release",
            "short_lane_fraction",
            "short_max_runtime_s", "short_max_gpus", "preemption_grace_s", "session_renewals_per_day",
            "session_warning_min",
        ]  # fmt: skip
        read_only_fields = fields
