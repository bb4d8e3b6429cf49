"""Delivery against allocation, and the what-if panel. Thin views over budgets.delivery / whatif."""

from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from budgets import whatif
from budgets.delivery import delivery_report
from budgets.models import BudgetNode
from budgets.selectors import budget_node_for_user, cluster_for_user, cluster_list
from portal import charts
from portal.csv_export import delivery_csv, wants_csv
from portal.metrics import PERIODS_DAYS
from portal.pages import parse_days
from portal.requests import HtmxHttpRequest


@login_required
@require_GET
def delivery_index(request: HtmxHttpRequest, cluster_slug: str) -> HttpResponse:
    """The cluster's first top-level node."""
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    root = BudgetNode.objects.filter(parent__isnull=True, archived=False).order_by("name", "id").first()
    if root is None:
        return render(request, "portal/pages/no_clusters.html")
    return redirect("budgets:delivery", cluster_slug=cluster.slug, node_id=root.pk)


@login_required
@require_GET
def delivery(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    node = budget_node_for_user(user=request.user, node_id=node_id)
    report = delivery_report(
        node=node, cluster=cluster, user=request.user, now=timezone.now(), days=parse_days(request)
    )
    if wants_csv(request):
        return delivery_csv(report)
    chart = charts.line_chart(
        div_id="chart-delivery",
        x=report.x,
        series={
            "Owed": report.owed_gpus,
            "Delivered": report.delivered_gpus,
            "Entitlement": report.entitlement_series,
        },
        y_title="GPUs (GPU-hours per hour)",
        dashed=("Entitlement",),
    )
    causes = charts.bar_chart(
        div_id="chart-causes", labels=[label for _, label, _ in report.causes],
        values=[round(v, 1) for _, _, v in report.causes], x_title="GPU-hours",
    )  # fmt: skip
    context = {"report": report, "chart": chart, "causes_chart": causes, "periods": PERIODS_DAYS,
               "clusters": cluster_list(), "ancestors": _ancestors(node)}  # fmt: skip
    return render(request, "budgets/delivery/page.html", context)


def _ancestors(node: BudgetNode) -> list[BudgetNode]:
    paths = ["/".join(node.path.split("/")[:i]) for i in range(1, node.path.count("/") + 1)]
    return list(BudgetNode.objects.filter(path__in=paths).order_by("path"))


@login_required
@require_http_methods(["GET", "POST"])
def whatif_page(request: HtmxHttpRequest, cluster_slug: str) -> HttpResponse:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    errors: dict[str, str] = {}
    values: Mapping[str, str] = {}
    days = 7
    context: dict[str, object] = {"cluster": cluster, "run": None, "may_run": whatif.may_run_whatif(request.user),
                                  "days_choices": whatif.DAYS_CHOICES}  # fmt: skip
    status = 200
    if request.method == "POST":
        edits = whatif.parse_form(data=request.POST, cluster=cluster)
        errors, values, days = edits.errors, request.POST, edits.days
        if not edits.errors:
            try:
                run = whatif.whatif_start(
                    cluster=cluster, user=request.user, budgets=edits.budgets, days=edits.days
                )
            except whatif.WhatIfRefused as refused:
                context["refused"], status = str(refused), 429
            else:
                return redirect("budgets:whatif_run", run_id=run.pk)
        else:
            status = 400
    context.update(errors=errors, values=values, days=days)
    context["rows"] = [
        (row, values.get(f"budget-{row.node.pk}", ""), errors.get(f"budget-{row.node.pk}"))
        for row in whatif.editable_rows(cluster=cluster, user=request.user)
    ]
    return render(request, "budgets/delivery/whatif.html", context, status=status)


@login_required
@require_GET
def whatif_run(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = whatif.whatif_run_for_user(user=request.user, run_id=run_id)
    template = "budgets/delivery/_whatif_progress.html" if request.htmx else "budgets/delivery/whatif.html"
    return render(request, template, {"cluster": run.cluster, "run": run, "rows": None})
