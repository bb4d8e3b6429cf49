from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal import pages, views

urlpatterns = [
    path("", pages.home, name="home"),
    path("", include("portal.pages_urls")),
    path("healthz", views.healthz, name="healthz"),
    # Browsers and tools ask for /favicon.ico whatever the page links; send them to the SVG one.
    path("favicon.ico", RedirectView.as_view(url=static("portal/favicon.svg"), permanent=True)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("budgets/", include("budgets.urls")),
    path("scheduling/", include("scheduling.urls")),
    path("notifications/", include("notifications.urls")),
    path("api/v1/", include("budgets.api.urls")),
    path("api/v1/", include("scheduling.api.urls")),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file: the CSP allows no inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]
