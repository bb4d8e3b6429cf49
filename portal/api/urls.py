from django.urls import path
from rest_framework.routers import SimpleRouter

from portal.api import token_views, views

tokens = SimpleRouter(trailing_slash=True)
tokens.register("tokens", token_views.ApiTokenViewSet, basename="api-token-item")

urlpatterns = [
    path("auth/token/", token_views.obtain_token, name="api-token"),
    *tokens.urls,
    path("home/", views.home, name="api-home"),
    path("me/", views.me, name="api-me"),
    path("glossary/", views.glossary_terms, name="api-glossary"),
    path("pyramid/<slug:cluster_slug>/", views.pyramid, name="api-pyramid"),
    path("waits/<slug:cluster_slug>/", views.waits, name="api-waits"),
    path("delivery/<slug:cluster_slug>/<int:node_id>/", views.delivery, name="api-delivery"),
    path("queue/<slug:cluster_slug>/", views.queue, name="api-queue"),
    path("workloads/<int:workload_id>/why-pending/", views.why_pending, name="api-why-pending"),
    path("workloads/<int:workload_id>/start-options/", views.start_options, name="api-start-options"),
    path("whatif/<slug:cluster_slug>/", views.whatif_start, name="api-whatif"),
    path("whatif/runs/<int:run_id>/", views.whatif_status, name="api-whatif-run"),
]
