"""The queue and "why is my job pending?". Thin views over scheduling.reports."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from budgets.selectors import cluster_for_user, cluster_list
from portal.csv_export import queue_csv, wants_csv
from portal.requests import HtmxHttpRequest
from scheduling import reports
from scheduling.apps import options_memory
from scheduling.models import WorkloadClass
from scheduling.policy import ReasonCode
from scheduling.selectors import may_act_on, workload_get_for_user, workloads_may_act_on


@login_required
@require_GET
def queue_index(request: HtmxHttpRequest) -> HttpResponse:
    cluster = cluster_list().first()
    if cluster is None:
        return render(request, "portal/pages/no_clusters.html")
    return redirect("scheduling:queue", cluster_slug=cluster.slug)


@login_required
@require_GET
def queue(request: HtmxHttpRequest, cluster_slug: str) -> HttpResponse:
    """The page, or only its rows when htmx refreshes them (the filter travels in the query string)."""
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    filters = reports.clean_queue_filters(request.GET)
    if wants_csv(request):
        return queue_csv(cluster=cluster, filters=filters, now=timezone.now())
    page = reports.queue_page(
        cluster=cluster, filters=filters, number=reports.queue_page_number(request.GET), now=timezone.now()
    )
    context = {
        "cluster": cluster,
        "filters": filters,
        "page": page,
        "actable": workloads_may_act_on(request.user, page.rows),
        "workload_url": reverse("scheduling:workload", args=[0]).removesuffix("0/"),
        "summary": reports.queue_summary(cluster=cluster),
        "now": timezone.now(),
    }
    if request.htmx:
        return render(request, "scheduling/_queue_rows.html", context)
    context |= {
        "clusters": cluster_list(),
        "classes": WorkloadClass.choices,
        "codes": [c.value for c in ReasonCode],
    }
    return render(request, "scheduling/queue.html", context)


@login_required
@require_GET
def workload(request: HtmxHttpRequest, workload_id: int) -> HttpResponse:
    item = workload_get_for_user(user=request.user, workload_id=workload_id)
    detail = reports.workload_detail(workload=item, now=timezone.now())
    context = {"d": detail, "w": item, "now": timezone.now(), "may_act": may_act_on(request.user, item)}
    template = "scheduling/_workload_status.html" if request.htmx else "scheduling/workload.html"
    return render(request, template, context)


@login_required
@require_GET
def workload_options(request: HtmxHttpRequest, workload_id: int) -> HttpResponse:
    item = workload_get_for_user(user=request.user, workload_id=workload_id)
    options = reports.start_options_for_pass(workload=item, now=timezone.now(), memory=options_memory())
    context = {"options": options, "w": item, "may_act": may_act_on(request.user, item)}
    return render(request, "scheduling/_options.html", context)
