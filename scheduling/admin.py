"""The cluster's settings in the admin: the scheduling knobs a site may change (docs/policy.md).

Field-level validation is the model's (validators on each field), so the admin's form refuses an
out-of-range value next to the field, as any ModelForm of ``Cluster`` would.
"""

from __future__ import annotations

from django.contrib import admin

from scheduling.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "backend_kind", "gpu_type", "min_runtime_cap_s", "preemption_grace_s"]
    search_fields = ["name", "slug"]
    readonly_fields = ["created_at"]
    fieldsets = [
        (None, {"fields": ["name", "slug", "backend_kind", "backend_settings", "gpu_type", "created_at"]}),
        ("Fair share", {"fields": ["window_days", "min_runtime_cap_s", "pass_interval_s"]}),
        (
            "Preemption that weighs what it throws away",
            {
                "fields": [
                    "goodput_victims",
                    "end_work_margin",
                    "max_loss_per_gpu_s",
                    "rebalance_hysteresis",
                    "drain_release",
                    "preemption_grace_s",
                ]
            },  # fmt: skip
        ),
        ("Short work", {"fields": ["short_lane_fraction", "short_max_runtime_s", "short_max_gpus"]}),
        ("Interactive sessions", {"fields": ["session_renewals_per_day", "session_warning_min"]}),
    ]
