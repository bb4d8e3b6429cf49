"""Cross-cutting request handling: contention in the database is a 409 with a message, never a 500.

Writes lock what they rewrite (``budgets.services._lock_tree``), so two edits normally wait for
each other. If the database still gives up on one (a deadlock it broke, a lock or statement
timeout, SQLite's busy lock), the edit was rolled back whole: the caller may simply send it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from portal.contention import CONTENTION_MESSAGE, is_contention

logger = logging.getLogger(__name__)


class ContentionMiddleware:
    """Answer a request that lost a database race with 409 (JSON under /api/, text elsewhere)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_contention(exception):
            return None
        logger.warning("409 for %s %s: %s", request.method, request.path, exception)
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": CONTENTION_MESSAGE}, status=409)
        return HttpResponse(CONTENTION_MESSAGE, status=409, content_type="text/plain; charset=utf-8")


class RefuseNulMiddleware:
    """A NUL character in the query string or the path is a 400: no page or endpoint can use one,
    and PostgreSQL refuses it in any text parameter (a 500 wherever it reached a query)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        names = [
            name for name, values in request.GET.lists() if "\x00" in name or any("\x00" in v for v in values)
        ]
        if names or "\x00" in request.path:
            where = f"the parameter {names[0]!r}" if names else "the address"
            message = f"NUL characters (%00) are not allowed in {where}."
            if request.path.startswith("/api/"):
                field = names[0].replace("\x00", "") if names else "detail"
                return JsonResponse({field or "detail": [message]}, status=400)
            return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
