from rest_framework.routers import DefaultRouter

from budgets.api import views

router = DefaultRouter(trailing_slash=True)
router.register("budget-nodes", views.BudgetNodeViewSet, basename="budget-node")
router.register("allocations", views.AllocationViewSet, basename="allocation")
router.register("budget-changes", views.BudgetChangeViewSet, basename="budget-change")
router.register("clusters", views.ClusterViewSet, basename="cluster")

urlpatterns = [
    *router.urls,
]
