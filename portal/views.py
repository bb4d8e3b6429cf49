from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from budgets import selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = {
        "memberships": selectors.memberships_of(user=request.user),
        "clusters": list(selectors.cluster_list()),
    }
    return render(request, "portal/home.html", context)


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
