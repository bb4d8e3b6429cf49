"""Typed shapes of the pages' JSON (``portal.api.serializers`` builds it), for the OpenAPI schema.

The views build their bodies with the plain functions of ``portal.api.serializers`` (the same
reads the pages render); these classes only document those bodies, field by field, so a client
knows what it gets. The schemathesis run checks every answer against them.
"""

from __future__ import annotations

from rest_framework import serializers as s


def _ratio(help_text: str = "") -> s.FloatField:
    return s.FloatField(allow_null=True, help_text=help_text or "null when the denominator is 0")


def _series(help_text: str = "", *, nullable: bool = True) -> s.ListField:
    return s.ListField(child=s.FloatField(allow_null=nullable), help_text=help_text)


class PyramidNowSchema(s.Serializer):
    availability = _ratio("healthy / installed GPUs")
    occupancy = _ratio("busy / healthy GPUs")
    occupancy_allocated = _ratio()
    occupancy_unallocated = _ratio()
    impact = _ratio("delivered / owed GPU-hours")
    utilization = _ratio("mean GPU busy fraction of running work")
    installed_gpus = s.IntegerField()
    healthy_gpus = s.IntegerField()
    funded_gpus = s.FloatField()
    unfunded_gpus = s.FloatField()
    delivered_gpu_hours = s.FloatField()
    owed_gpu_hours = s.FloatField()
    allocations_at_95pct = s.IntegerField()
    allocations_owed = s.IntegerField()


class PyramidSeriesSchema(s.Serializer):
    time = s.ListField(child=s.DateTimeField())
    availability = _series()
    occupancy_allocated = _series()
    occupancy_unallocated = _series()
    impact = _series()
    utilization = _series()
    pass_mean_ms = _series()
    pass_max_ms = _series()


class UnhealthyNodeSchema(s.Serializer):
    name = s.CharField()
    gpus = s.IntegerField()
    domain = s.CharField(allow_blank=True)


class IdleButHeldSchema(s.Serializer):
    workload = s.IntegerField()
    user = s.CharField()
    busy_pct = s.FloatField(allow_null=True)


class MostPreemptedSchema(s.Serializer):
    workload = s.IntegerField()
    requeues = s.IntegerField()
    state = s.CharField()


class RecentPassSchema(s.Serializer):
    started_at = s.DateTimeField(allow_null=True)
    status = s.CharField()
    total_ms = s.FloatField(allow_null=True)


class PyramidSchema(s.Serializer):
    cluster = s.CharField()
    days = s.IntegerField()
    now = PyramidNowSchema()
    series = PyramidSeriesSchema()
    unhealthy_nodes = UnhealthyNodeSchema(many=True)
    idle_but_held = IdleButHeldSchema(many=True)
    most_preempted = MostPreemptedSchema(many=True)
    recent_passes = RecentPassSchema(many=True)


class ClassWaitsSchema(s.Serializer):
    workload_class = s.CharField()
    starts = s.IntegerField()
    p50_s = s.FloatField(allow_null=True)
    p90_s = s.FloatField(allow_null=True)


class WaitsSchema(s.Serializer):
    cluster = s.CharField()
    days = s.IntegerField()
    classes = ClassWaitsSchema(many=True)
    time = s.ListField(child=s.DateTimeField())
    p50_s_by_class = s.DictField(child=_series(), help_text="workload class -> p50 wait per bucket")
    p90_s_by_class = s.DictField(child=_series(), help_text="workload class -> p90 wait per bucket")
    preemptions = s.IntegerField()
    requeues = s.IntegerField()
    gpu_hours_lost = s.FloatField()
    preemptions_series = s.ListField(child=s.IntegerField())
    gpu_hours_lost_series = _series(nullable=False)


class NodeRefSchema(s.Serializer):
    id = s.IntegerField()
    path = s.CharField()
    name = s.CharField()


class DeliverySeriesSchema(s.Serializer):
    time = s.ListField(child=s.DateTimeField())
    delivered_gpus = _series()
    owed_gpus = _series()
    entitlement_gpus = _series()


class ChildDeliverySchema(s.Serializer):
    id = s.IntegerField()
    path = s.CharField()
    allocation_gpus = s.FloatField()
    delivered_gpu_hours = s.FloatField()
    owed_gpu_hours = s.FloatField()
    delivered_owed_ratio = _ratio()
    under_95pct = s.BooleanField()


class CauseSchema(s.Serializer):
    cause = s.CharField()
    label = s.CharField()  # type: ignore[assignment]  # a field named like Field.label, as the JSON has it
    gpu_hours = s.FloatField()


class DeliverySchema(s.Serializer):
    node = NodeRefSchema()
    cluster = s.CharField()
    days = s.IntegerField()
    allocation_gpus = s.FloatField()
    entitlement_gpus = s.FloatField()
    fair_share_ratio = _ratio()
    delivered_gpu_hours = s.FloatField()
    owed_gpu_hours = s.FloatField()
    delivered_owed_ratio = _ratio()
    undelivered_gpu_hours = s.FloatField()
    series = DeliverySeriesSchema()
    children = ChildDeliverySchema(many=True)
    undelivered_by_cause = CauseSchema(many=True)


class QueueRowSchema(s.Serializer):
    id = s.IntegerField()
    name = s.CharField(allow_blank=True)
    position = s.IntegerField(allow_null=True, help_text="place in the scheduling order")
    allocation = s.CharField(allow_null=True)
    user = s.CharField()
    gpus = s.IntegerField()
    workload_class = s.CharField()
    wait_s = s.FloatField()
    reason_code = s.CharField(allow_null=True)
    reason = s.CharField(allow_null=True, help_text="the pending reason as one sentence")
    estimated_start = s.DateTimeField(allow_null=True)


class QueueFiltersSchema(s.Serializer):
    allocation = s.CharField(required=False, help_text="a budget node path; its subtree is included")
    user = s.CharField(required=False)
    reason = s.CharField(required=False)
    # "class" is a Python keyword: declared below


QueueFiltersSchema._declared_fields["class"] = s.CharField(required=False)


class QueueSchema(s.Serializer):
    cluster = s.CharField()
    filters = QueueFiltersSchema()
    workloads = s.IntegerField(help_text="pending workloads on the cluster (unfiltered)")
    gpus = s.IntegerField(help_text="GPUs they ask for")
    results = QueueRowSchema(many=True)


class ContractSchema(s.Serializer):
    minimum_runtime_s = s.IntegerField()
    resumable = s.BooleanField()
    protected_until = s.DateTimeField(allow_null=True)


class BranchSchema(s.Serializer):
    path = s.CharField()
    fair_share_ratio = _ratio()
    ahead = s.IntegerField()
    yours = s.BooleanField()


class AncestorSchema(s.Serializer):
    ancestor = s.CharField()
    branches = BranchSchema(many=True)


class FairTreeSchema(s.Serializer):
    ahead = s.IntegerField()
    same_allocation_ahead = s.IntegerField()
    first_shared_ancestors = AncestorSchema(many=True)


class RunRowSchema(s.Serializer):
    attempt = s.IntegerField()
    started_at = s.DateTimeField(allow_null=True)
    ended_at = s.DateTimeField(allow_null=True)
    gpus = s.IntegerField()
    wait_s = s.FloatField(allow_null=True)
    end_reason = s.CharField(allow_null=True)


class DecisionRowSchema(s.Serializer):
    at = s.DateTimeField(allow_null=True)
    kind = s.CharField()
    reason = s.CharField(allow_blank=True)


class ReasonChangeSchema(s.Serializer):
    at = s.DateTimeField(allow_null=True)
    code = s.CharField()
    reason = s.CharField(allow_blank=True)


class WhyPendingSchema(QueueRowSchema):
    state = s.CharField()
    reason_params = s.DictField(help_text="the reason's structured parameters")
    contract = ContractSchema()
    fair_tree = FairTreeSchema(allow_null=True)
    runs = RunRowSchema(many=True)
    decisions = DecisionRowSchema(many=True)
    reason_history = ReasonChangeSchema(many=True)


class StartOptionSchema(s.Serializer):
    option = s.CharField()
    starts_now = s.BooleanField()
    estimated_start = s.DateTimeField(allow_null=True)
    detail = s.CharField(
        allow_blank=True, help_text="in words: would start in the next pass, or why it would still wait"
    )
    code = s.CharField(
        allow_null=True, help_text="the reason code it would still wait with (null when it starts)"
    )
    changes = s.DictField(help_text="the workload fields the option changes")


class StartOptionsSchema(s.Serializer):
    options = StartOptionSchema(many=True)


class TermSchema(s.Serializer):
    slug = s.CharField()
    term = s.CharField()
    meaning = s.CharField()


class GlossarySchema(s.Serializer):
    terms = TermSchema(many=True)


class HomeWorkloadSchema(s.Serializer):
    id = s.IntegerField()
    name = s.CharField(allow_blank=True)
    cluster = s.CharField()
    state = s.CharField()
    gpus = s.IntegerField()
    allocation = s.CharField(allow_null=True)


class HomeAllocationSchema(s.Serializer):
    path = s.CharField()
    cluster = s.CharField()
    role = s.CharField()
    delivered_gpu_hours = s.FloatField()
    owed_gpu_hours = s.FloatField()
    delivered_owed_ratio = _ratio()
    under_95pct = s.BooleanField()


class HomeSchema(s.Serializer):
    workloads = HomeWorkloadSchema(many=True)
    state_counts = s.DictField(child=s.IntegerField(), help_text="state -> how many of my workloads")
    days = s.IntegerField()
    allocations = HomeAllocationSchema(many=True)
    pyramids = s.DictField(child=PyramidNowSchema(), help_text="cluster slug -> its pyramid now")


class MembershipSchema(s.Serializer):
    path = s.CharField(help_text="budget node path")
    role = s.CharField(help_text="manager or member")


class MeSchema(s.Serializer):
    username = s.CharField()
    name = s.CharField(allow_blank=True)
    email = s.CharField(allow_blank=True)
    staff = s.BooleanField()
    memberships = MembershipSchema(many=True)


class WhatIfStartSchema(s.Serializer):
    """The request of a what-if; also its parser (NaN, infinities and negatives are refused)."""

    days = s.IntegerField(min_value=1, max_value=28, default=7, help_text="days of history to replay")
    budgets = s.DictField(
        child=s.DecimalField(max_digits=10, decimal_places=2, min_value=0),
        help_text="budget node path -> edited GPUs (>= 0, two decimals)",
    )


class WhatIfRunSchema(s.Serializer):
    id = s.IntegerField()
    status = s.CharField()
    progress = s.FloatField()
    days = s.IntegerField()
    budgets = s.DictField(child=s.FloatField())
    result = s.DictField(allow_null=True, help_text="delivery before and after, when done")
    error = s.CharField(allow_null=True)
