from django.urls import path

from scheduling import views

app_name = "scheduling"
urlpatterns = [
    path("queue/", views.queue_index, name="queue_index"),
    path("queue/<slug:cluster_slug>/", views.queue, name="queue"),
    path("workloads/<int:workload_id>/", views.workload, name="workload"),
    path("workloads/<int:workload_id>/options/", views.workload_options, name="workload_options"),
]
