"""Everything the pages show, as JSON under /api/v1/. Thin: parse, access-checked getter, one read."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotAuthenticated, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from budgets import whatif
from budgets.access import memberships_by_path
from budgets.delivery import delivery_report
from budgets.selectors import budget_node_for_user, cluster_for_user
from portal import dashboards, glossary, metrics
from portal.api import schemas, serializers
from portal.models import WhatIfRun
from portal.pages import parse_days
from scheduling import reports
from scheduling.apps import options_memory
from scheduling.selectors import workload_get_for_user

DAYS = OpenApiParameter("days", int, description="7, 30 or 90 (default 7)")
QUEUE_FILTERS = [
    ("allocation", "a budget node path; its whole subtree is listed"),
    ("user", "user name"),
    ("class", "workload class"),
    ("reason", "pending reason code"),
]


@extend_schema(
    responses=schemas.HomeSchema, summary="My workloads, allocations and the pyramid's four numbers"
)
@api_view(["GET"])
def home(request: Request) -> Response:
    now = timezone.now()
    return Response(serializers.home_json(dashboards.home_board(user=request.user, now=now), now=now))


@extend_schema(responses=schemas.MeSchema, summary="Who the token belongs to, and their memberships")
@api_view(["GET"])
def me(request: Request) -> Response:
    user = request.user
    if not isinstance(user, User):  # IsAuthenticated already refused anonymous requests
        raise NotAuthenticated()
    return Response({
        "username": user.username, "name": user.get_full_name(), "email": user.email, "staff": user.is_staff,
        "memberships": [{"path": path, "role": role} for path, role in sorted(memberships_by_path(user).items())],
    })  # fmt: skip


@extend_schema(
    responses=schemas.PyramidSchema, parameters=[DAYS], summary="Metrics pyramid: now and over time"
)
@api_view(["GET"])
def pyramid(request: Request, cluster_slug: str) -> Response:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    board = dashboards.pyramid_board(
        cluster=cluster, now=timezone.now(), days=parse_days(request), with_charts=False
    )
    return Response({
        "cluster": cluster.slug, "days": board.days, "now": serializers.pyramid_now_json(board.now),
        "period": serializers.pyramid_period_json(board.series),
        "series": serializers.pyramid_series_json(board.series),
        "unhealthy_nodes": [{"name": n.name, "gpus": n.gpus, "domain": n.topology_domain} for n in board.unhealthy_nodes],
        "idle_but_held": [{"workload": s["workload_id"], "user": s["workload__user_name"], "busy_pct": s["busy"]} for s in board.squatting],
        "most_preempted": [{"workload": w.pk, "requeues": w.requeue_count, "state": w.state} for w in board.most_preempted],
        "recent_passes": [{"started_at": serializers.iso(p.started_at), "status": p.status, "total_ms": p.total_ms} for p in board.recent_passes],
    })  # fmt: skip


@extend_schema(
    responses=schemas.WaitsSchema, parameters=[DAYS], summary="Queue waits p50/p90 per class, preemptions"
)
@api_view(["GET"])
def waits(request: Request, cluster_slug: str) -> Response:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    report = metrics.wait_report(cluster=cluster, now=timezone.now(), days=parse_days(request))
    return Response({"cluster": cluster.slug, "days": parse_days(request), **serializers.waits_json(report)})


@extend_schema(
    responses=schemas.DeliverySchema,
    parameters=[DAYS],
    summary="Delivery against allocation of a budget node",
)
@api_view(["GET"])
def delivery(request: Request, cluster_slug: str, node_id: int) -> Response:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    node = budget_node_for_user(user=request.user, node_id=node_id)
    report = delivery_report(
        node=node, cluster=cluster, user=request.user, now=timezone.now(), days=parse_days(request)
    )
    return Response(serializers.delivery_json(report))


@extend_schema(
    responses=schemas.QueueSchema,
    parameters=[OpenApiParameter(name, str, description=text) for name, text in QUEUE_FILTERS],
    summary="Pending workloads in scheduling order (filters: allocation, user, class, reason)",
)
@api_view(["GET"])
def queue(request: Request, cluster_slug: str) -> Response:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    filters = reports.clean_queue_filters(request.query_params)
    now = timezone.now()
    rows = reports.queue_rows(cluster=cluster, filters=filters)
    return Response({"cluster": cluster.slug, "filters": filters, **reports.queue_summary(cluster=cluster),
                     "results": [serializers.queue_row_json(w, now=now) for w in rows]})  # fmt: skip


@extend_schema(
    responses=schemas.WhyPendingSchema,
    summary="Why is this workload pending: sentence, reason, position, Fair Tree, history",
)
@api_view(["GET"])
def why_pending(request: Request, workload_id: int) -> Response:
    workload = workload_get_for_user(user=request.user, workload_id=workload_id)
    now = timezone.now()
    return Response(
        serializers.why_pending_json(reports.workload_detail(workload=workload, now=now), now=now)
    )


@extend_schema(
    responses=schemas.StartOptionsSchema,
    summary="Changes that would start a pending workload sooner, decided by the policy",
)
@api_view(["GET"])
def start_options(request: Request, workload_id: int) -> Response:
    workload = workload_get_for_user(user=request.user, workload_id=workload_id)
    return Response(
        {
            "options": serializers.options_json(
                reports.start_options_for_pass(workload=workload, now=timezone.now(), memory=options_memory())
            )
        }
    )


@extend_schema(responses=schemas.GlossarySchema, summary="The vocabulary (DESIGN 2)")
@api_view(["GET"])
def glossary_terms(request: Request) -> Response:
    return Response(
        {"terms": [{"slug": t.slug, "term": t.word, "meaning": t.meaning} for t in glossary.TERMS]}
    )


@extend_schema(request=schemas.WhatIfStartSchema, responses={202: schemas.WhatIfRunSchema},
               summary="Start a what-if: {\"days\": 7, \"budgets\": {\"node path\": GPUs}}")  # fmt: skip
@api_view(["POST"])
def whatif_start(request: Request, cluster_slug: str) -> Response:
    cluster = cluster_for_user(user=request.user, slug=cluster_slug)
    if not whatif.may_run_whatif(request.user):  # access before input: 403 whatever was sent
        raise PermissionDenied("Only managers and on-call staff may run a what-if.")
    edits = whatif.parse_api(data=request.data if isinstance(request.data, dict) else {}, cluster=cluster)
    if edits.errors:
        return Response(edits.errors, status=400)
    try:
        run = whatif.whatif_start(cluster=cluster, user=request.user, budgets=edits.budgets, days=edits.days)
    except whatif.WhatIfRefused as refused:
        return Response({"detail": str(refused)}, status=429)
    return Response(_whatif_json(run), status=202)


@extend_schema(
    responses=schemas.WhatIfRunSchema,
    summary="A what-if's progress and, when done, delivery before and after",
)
@api_view(["GET"])
def whatif_status(request: Request, run_id: int) -> Response:
    return Response(_whatif_json(whatif.whatif_run_for_user(user=request.user, run_id=run_id)))


def _whatif_json(run: WhatIfRun) -> dict:
    return {"id": run.pk, "status": run.status, "progress": run.progress, "days": run.days,
            "budgets": run.budgets, "result": run.result or None, "error": run.error or None}  # fmt: skip
