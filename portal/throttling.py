"""Rate limits on signing in. django-axes counts failed passwords (pages and the token endpoint
alike) per username and per address and locks both out for a while; DRF's throttle caps token
requests per address whatever their outcome. Both answer 429 with a sentence saying what to do.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView


def lockout_message() -> str:
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return (
        f"Too many failed sign-ins for this username or from this address. "
        f"Wait {minutes} minutes and try again, or ask an admin to unlock the account."
    )


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict | None = None
) -> HttpResponse:
    """django-axes' AXES_LOCKOUT_CALLABLE: JSON for the API, the login page's sentence otherwise."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": lockout_message()}, status=429)
    return render(request, "registration/locked_out.html", {"message": lockout_message()}, status=429)


class TokenRequestThrottle(SimpleRateThrottle):
    """At most ``TOKEN_REQUEST_RATE`` token requests per address (signed in or not)."""

    scope = "token"

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
