"""The bell, the list of notifications, marking them read, and the preferences. Thin views."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from notifications import selectors
from notifications.services import node_webhooks_set, notifications_mark_read, preferences_set
from portal.requests import AuthenticatedHttpRequest


@login_required
@require_GET
def bell(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The header's bell: the unread count, polled by htmx (so pages pay no query for it)."""
    return render(request, "notifications/_bell.html", {"unread": selectors.unread_count(request.user)})


@login_required
@require_GET
def notification_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    rows = list(selectors.notifications_for(request.user)[: selectors.PAGE_SIZE])
    return render(
        request, "notifications/list.html", {"rows": rows, "unread": sum(1 for r in rows if not r.read_at)}
    )


@login_required
@require_POST
def mark_read(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Mark one notification (``id``) or all of the user's read; another user's ids match nothing."""
    raw = request.POST.get("id", "")
    ids = [int(raw)] if raw.isdigit() else None
    notifications_mark_read(user=request.user, ids=ids, now=timezone.now())
    return redirect("notifications:list")


def url_error(url: str) -> str:
    try:
        if url:
            URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        return "Enter a full http:// or https:// URL (e.g. a Slack incoming webhook)."
    return ""


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request: AuthenticatedHttpRequest) -> HttpResponse:
    managed = selectors.managed_node_webhooks(request.user)
    posted = request.method == "POST"
    url = request.POST.get("webhook_url", "").strip()
    node_urls = {node.pk: request.POST.get(f"node-{node.pk}", "").strip() for node, _ in managed}
    errors = {"webhook_url": url_error(url), **{f"node-{pk}": url_error(u) for pk, u in node_urls.items()}}
    errors = {field: error for field, error in errors.items() if error and posted}
    if posted and not errors:
        preferences_set(user=request.user, data={k: True for k in request.POST if "." in k}, webhook_url=url)
        node_webhooks_set(managed=[node for node, _ in managed], urls=node_urls)
        messages.success(request, "Notification preferences saved.")
        return redirect("notifications:preferences")
    hook = selectors.user_webhook(request.user)
    context = {
        "rows": selectors.preferences_for(request.user),
        "webhook_url": url if posted else (hook.url if hook else ""),
        "nodes": [
            (node, node_urls[node.pk] if posted else saved, errors.get(f"node-{node.pk}"))
            for node, saved in managed
        ],
        "errors": errors,
    }
    return render(request, "notifications/preferences.html", context, status=400 if errors else 200)
