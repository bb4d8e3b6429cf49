"""Workload API shapes: the submission (input) and the workload with its pending reason (output)."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from budgets.access import memberships_by_path
from portal.api.parsers import contains_nul
from scheduling.models import Cluster, PendingReason, Run, Workload, WorkloadClass
from scheduling.selectors import may_act_on

MAX_STORED_INT = 2**31 - 1  # the columns are PositiveIntegerField


def _refuse_nul(value: object) -> None:
    if contains_nul(value):
        raise serializers.ValidationError("Text may not contain NUL characters (\\u0000).")


class WorkloadSubmitSerializer(serializers.Serializer):
    """What a submission may say. Rules that need the database live in ``workload_submit``."""

    cluster = serializers.CharField(max_length=100, help_text="cluster slug, e.g. main")
    allocation = serializers.CharField(
        max_length=1000, help_text="allocation (budget node) path, e.g. lab/vision/perception"
    )
    gpus = serializers.IntegerField(max_value=MAX_STORED_INT)
    gpus_per_node = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_STORED_INT
    )
    gpu_type = serializers.CharField(
        required=False, allow_blank=True, max_length=50, default="",
        help_text="one of the cluster's node GPU types (e.g. A100); empty for any",
    )  # fmt: skip
    workload_class = serializers.ChoiceField(choices=WorkloadClass.choices, default=WorkloadClass.BATCH)
    min_runtime_s = serializers.IntegerField(
        default=0, max_value=MAX_STORED_INT, help_text="protected from preemption this long (capped)"
    )
    resumable = serializers.BooleanField(default=False)
    max_runtime_s = serializers.IntegerField(required=False, allow_null=True, max_value=MAX_STORED_INT)
    checkpoint_interval_s = serializers.IntegerField(
        required=False,
        allow_null=True,
        max_value=MAX_STORED_INT,
        help_text="resumable work: how often it saves progress, in seconds",
    )
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    command = serializers.CharField(required=False, allow_blank=True, default="")
    image = serializers.CharField(required=False, allow_blank=True, default="")
    metadata = serializers.DictField(required=False, default=dict, validators=[_refuse_nul])


class PendingReasonSerializer(serializers.ModelSerializer):
    class Meta:
        model = PendingReason
        fields = ["code", "message", "params", "position", "estimated_start", "updated_at"]


class RunSerializer(serializers.ModelSerializer):
    class Meta:
        model = Run
        fields = ["attempt", "gpus", "placement", "funded", "started_at", "protected_until", "ended_at",
                  "end_reason", "wait_s"]  # fmt: skip


class WorkloadSerializer(serializers.ModelSerializer):
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    allocation = serializers.CharField(source="allocation_path", read_only=True)
    user = serializers.CharField(source="user_name", read_only=True)
    metadata = serializers.SerializerMethodField(
        help_text="image, command and what the scheduler noted; the command (it may carry secrets) is "
        "shown only to the owner, managers of the allocation and staff"
    )
    pending_reason = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = [
            "id", "name", "cluster", "allocation", "user", "workload_class", "gpus", "gpus_per_node",
            "gpu_type", "min_runtime_s", "min_runtime_requested_s", "resumable", "max_runtime_s", "checkpoint_interval_s",
            "metadata", "source",
            "state", "submitted_at", "queued_at", "first_started_at", "finished_at", "attempt", "requeue_count",
            "held", "held_by", "held_at", "held_note", "cancel_requested_at", "backend_ref", "pending_reason",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_metadata(self, workload: Workload) -> dict:
        metadata = dict(workload.metadata or {})
        if "command" in metadata and not self._may_see_command(workload):
            del metadata["command"]
        return metadata

    def _may_see_command(self, workload: Workload) -> bool:
        request = self.context.get("request")
        if request is None:
            return False
        context = cast(dict[str, Any], self.context)  # DRF passes a dict; the stubs say Mapping
        if "memberships" not in context:  # one memberships query per response, not per row
            context["memberships"] = memberships_by_path(request.user)
        return may_act_on(request.user, workload, memberships=context["memberships"])

    @extend_schema_field(PendingReasonSerializer(allow_null=True))
    def get_pending_reason(self, workload: Workload) -> dict | None:
        reason = getattr(workload, "pending_reason", None) if workload.state == "pending" else None
        return PendingReasonSerializer(reason).data if reason is not None else None


class WorkloadDetailSerializer(WorkloadSerializer):
    runs = RunSerializer(many=True, read_only=True)

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "runs"]
        read_only_fields = fields


class HoldSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class RenewalSerializer(serializers.Serializer):
    """The answer to renew-protection: the session's new end of protection."""

    id = serializers.IntegerField()
    protected_until = serializers.DateTimeField()
    renewals_left = serializers.IntegerField(help_text="renewals still possible in the last 24 hours")
