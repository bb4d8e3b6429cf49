from django.urls import path

from budgets import delivery_views, views

app_name = "budgets"
urlpatterns = [
    path("delivery/<slug:cluster_slug>/", delivery_views.delivery_index, name="delivery_index"),
    path("delivery/<slug:cluster_slug>/<int:node_id>/", delivery_views.delivery, name="delivery"),
    path("whatif/<slug:cluster_slug>/", delivery_views.whatif_page, name="whatif"),
    path("whatif/runs/<int:run_id>/", delivery_views.whatif_run, name="whatif_run"),
    path("", views.tree_index, name="index"),
    path("<slug:cluster_slug>/", views.tree_page, name="tree"),
    path("<slug:cluster_slug>/nodes/<int:node_id>/", views.node_panel, name="panel"),
    path("<slug:cluster_slug>/nodes/<int:node_id>/allocation/", views.allocation_set, name="allocation"),
    path("<slug:cluster_slug>/nodes/<int:node_id>/rename/", views.node_rename, name="rename"),
    path("<slug:cluster_slug>/nodes/<int:node_id>/move/", views.node_move, name="move"),
    path("<slug:cluster_slug>/nodes/<int:node_id>/children/", views.node_add_child, name="add_child"),
    path("<slug:cluster_slug>/nodes/<int:node_id>/archive/", views.node_archive, name="archive"),
]
