from django.urls import path

from portal import pages

urlpatterns = [
    path("glossary/", pages.glossary_page, name="glossary"),
    path("metrics/", pages.pyramid_index, name="pyramid_index"),
    path("metrics/<slug:cluster_slug>/", pages.pyramid, name="pyramid"),
    path("metrics/<slug:cluster_slug>/waits/", pages.waits, name="waits"),
]
