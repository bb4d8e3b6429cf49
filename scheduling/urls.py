from django.urls import path

from scheduling import actions, views

app_name = "scheduling"
urlpatterns = [
    path("queue/", views.queue_index, name="queue_index"),
    path("queue/<slug:cluster_slug>/", views.queue, name="queue"),
    path("workloads/<int:workload_id>/", views.workload, name="workload"),
    path("workloads/<int:workload_id>/options/", views.workload_options, name="workload_options"),
    path(
        "workloads/<int:workload_id>/cancel/",
        actions.workload_action,
        {"verb": "cancel"},
        name="workload_cancel",
    ),
    path(
        "workloads/<int:workload_id>/hold/", actions.workload_action, {"verb": "hold"}, name="workload_hold"
    ),
    path(
        "workloads/<int:workload_id>/release/",
        actions.workload_action,
        {"verb": "release"},
        name="workload_release",
    ),
    path(
        "workloads/<int:workload_id>/renew/",
        actions.workload_action,
        {"verb": "renew"},
        name="workload_renew",
    ),
    path("workloads/<int:workload_id>/resubmit/", actions.workload_resubmit_view, name="workload_resubmit"),
]
