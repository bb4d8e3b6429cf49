from django.urls import path

from portal import account, pages

urlpatterns = [
    path("glossary/", pages.glossary_page, name="glossary"),
    path("account/tokens/", account.tokens_page, name="tokens"),
    path("account/tokens/new/", account.token_create, name="token_create"),
    path("account/tokens/<int:token_id>/revoke/", account.token_revoke_view, name="token_revoke"),
    path("metrics/", pages.pyramid_index, name="pyramid_index"),
    path("metrics/<slug:cluster_slug>/", pages.pyramid, name="pyramid"),
    path("metrics/<slug:cluster_slug>/waits/", pages.waits, name="waits"),
]
