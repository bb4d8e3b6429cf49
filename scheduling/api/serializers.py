"""Workload API shapes: the submission (input) and the workload with its pending reason (output)."""

from __future__ import annotations

from rest_framework import serializers

from scheduling.models import PendingReason, Run, Workload, WorkloadClass


class WorkloadSubmitSerializer(serializers.Serializer):
    """What a submission may say. Rules that need the database live in ``workload_submit``."""

    cluster = serializers.CharField(help_text="cluster slug, e.g. main")
    allocation = serializers.CharField(help_text="allocation (budget node) path, e.g. lab/vision/perception")
    gpus = serializers.IntegerField()
    gpus_per_node = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    workload_class = serializers.ChoiceField(choices=WorkloadClass.choices, default=WorkloadClass.BATCH)
    min_runtime_s = serializers.IntegerField(
        default=0, help_text="protected from preemption this long (capped)"
    )
    resumable = serializers.BooleanField(default=False)
    max_runtime_s = serializers.IntegerField(required=False, allow_null=True)
    checkpoint_interval_s = serializers.IntegerField(
        required=False, allow_null=True, help_text="resumable work: how often it saves progress, in seconds"
    )
    gpu_type = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="e.g. H100; empty: the cluster's own"
    )
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    command = serializers.CharField(required=False, allow_blank=True, default="")
    image = serializers.CharField(required=False, allow_blank=True, default="")
    metadata = serializers.DictField(required=False, default=dict)


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
    cluster = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    allocation = serializers.CharField(source="allocation_path", read_only=True)
    user = serializers.CharField(source="user_name", read_only=True)
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
