"""Reads of notifications for the person asking (the one scope: their own)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from budgets.models import BudgetNode, Role
from notifications.models import DEFAULT_CHANNELS, EventKind, Notification, Preference, Webhook

PAGE_SIZE = 100


def notifications_for(user: User) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user).select_related("event").order_by("-created_at", "-id")


def unread_count(user: User) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def preferences_for(user: User) -> list[tuple[str, str, dict[str, bool]]]:
    """(kind, label, {"in_portal", "email", "webhook"}) for every kind, stored or default."""
    stored = {p.kind: p for p in Preference.objects.filter(user=user)}
    rows = []
    for kind, label in EventKind.choices:
        pref = stored.get(kind)
        channels = (
            {"in_portal": pref.in_portal, "email": pref.email, "webhook": pref.webhook}
            if pref
            else dict(DEFAULT_CHANNELS[kind])
        )
        rows.append((kind, label, channels))
    return rows


def managed_node_webhooks(user: User) -> list[tuple[BudgetNode, str]]:
    """(node, its webhook URL or "") for each node the user manages, by path."""
    nodes = BudgetNode.objects.filter(
        memberships__user=user, memberships__role=Role.MANAGER, archived=False
    ).order_by("path")
    urls = dict(Webhook.objects.filter(node__in=nodes).order_by("-id").values_list("node_id", "url"))
    return [(node, urls.get(node.pk, "")) for node in nodes]


def user_webhook(user: User) -> Webhook | None:
    return Webhook.objects.filter(user=user).order_by("id").first()
