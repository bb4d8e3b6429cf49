"""Links to the portal from outside it: emails, webhooks, Slack, and notes written into backend jobs."""

from __future__ import annotations

from django.conf import settings


def absolute_url(path: str) -> str:
    """``path`` (from ``reverse``) as users reach the portal: ``settings.PORTAL_URL`` + path."""
    return settings.PORTAL_URL.rstrip("/") + path
