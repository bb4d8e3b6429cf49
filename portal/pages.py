"""The cross-cutting pages: home per persona, the metrics pyramid, queue waits, the glossary.

Thin views: parse, fetch through the access-checked getter, call one read, render.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from budgets.selectors import cluster_for_user, cluster_list
from portal import dashboards, glossary, metrics
from portal.csv_export import waits_csv, wants_csv


def parse_days(request: HttpRequest, default: int = 7) -> int:
    """``?days=`` restricted to the offered periods (7, 30, 90)."""
    try:
        days = int(request.GET.get("days", default))
    except ValueError:
        return default
    return days if days in metrics.PERIODS_DAYS else default


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    board = dashboards.home_board(user=request.user, now=timezone.now())
    return render(request, "portal/pages/home.html", {"board": board})


@login_required
@require_GET
def pyramid_index(request: HttpRequest) -> HttpResponse:
    cluster = cluster_list().first()
    if cluster is None:
        return render(request, "portal/pages/no_clusters.html")
    return redirect("pyramid", cluster_slug=cluster.slug)


@login_required
@require_GET
def pyramid(request: HttpRequest, cluster_slug: str) -> HttpResponse:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    board = dashboards.pyramid_board(cluster=cluster, now=timezone.now(), days=parse_days(request))
    return render(
        request,
        "portal/pages/pyramid.html",
        {"board": board, "clusters": cluster_list(), "periods": metrics.PERIODS_DAYS},
    )


@login_required
@require_GET
def waits(request: HttpRequest, cluster_slug: str) -> HttpResponse:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    if wants_csv(request):
        report = metrics.wait_report(cluster=cluster, now=timezone.now(), days=parse_days(request))
        return waits_csv(cluster=cluster, report=report, days=parse_days(request))
    board = dashboards.waits_board(cluster=cluster, now=timezone.now(), days=parse_days(request))
    return render(
        request,
        "portal/pages/waits.html",
        {"board": board, "clusters": cluster_list(), "periods": metrics.PERIODS_DAYS},
    )


@require_GET
def glossary_page(request: HttpRequest) -> HttpResponse:
    return render(request, "portal/pages/glossary.html", {"terms": glossary.TERMS})
