from rest_framework.routers import DefaultRouter

from scheduling.api.views import WorkloadViewSet

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("workloads", WorkloadViewSet, basename="workload")
urlpatterns = router.urls
