from django.urls import path
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.routers import DefaultRouter

from budgets.api import views

router = DefaultRouter(trailing_slash=True)
router.register("budget-nodes", views.BudgetNodeViewSet, basename="budget-node")
router.register("allocations", views.AllocationViewSet, basename="allocation")
router.register("budget-changes", views.BudgetChangeViewSet, basename="budget-change")
router.register("clusters", views.ClusterViewSet, basename="cluster")

urlpatterns = [
    path("auth/token/", obtain_auth_token, name="api-token"),
    *router.urls,
]
