"""Request types for type checking: a view behind django-htmx's middleware has ``request.htmx``;
a view behind ``login_required`` has a signed-in ``request.user``."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class AuthenticatedHttpRequest(HttpRequest):
    """A request that ``login_required`` let through: its user is never anonymous."""

    user: User
