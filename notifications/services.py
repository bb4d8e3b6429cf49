"""Writes of notifications: record an event, fan it out, send one delivery, mark as read.

The path of one event, and why it is built so:

1. ``event_record`` runs inside the caller's transaction (the pass's, a service's): one INSERT ...
   ON CONFLICT DO NOTHING on the unique ``key``, so recording the same thing twice (a pass retried,
   two beat ticks) records it once, and a rolled-back pass records nothing. After commit it queues
   ``notifications.fan_out``; a broker that is down is only logged (the minutely sweep re-queues
   events left un-fanned), never an error in the pass.
2. ``event_fan_out`` (in a worker): writes the message, one ``Notification`` per recipient and one
   ``Delivery`` per e-mail address and webhook URL (unique constraints again), marks the event
   fanned out, and queues a send per pending delivery.
3. ``delivery_send``: claims the delivery with a conditional UPDATE (pending -> sending, or a claim
   older than ``CLAIM_STALE_S`` whose worker died), sends, and marks it sent; a failure goes back to
   pending with the error and the task retries with backoff, the last failure is recorded as failed.
   A delivery is therefore sent once unless a worker dies between the send and the UPDATE.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import requests
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from notifications.messages import message_for
from notifications.models import (
    Channel,
    Delivery,
    DeliveryStatus,
    Event,
    EventKind,
    Notification,
)
from notifications.recipients import Recipient, recipients_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from budgets.models import BudgetNode

logger = logging.getLogger(__name__)
CLAIM_STALE_S = 120


def event_record(
    *,
    kind: EventKind | str,
    key: str,
    now: datetime,
    cluster_id: int | None = None,
    workload_id: int | None = None,
    node_id: int | None = None,
    user_id: int | None = None,
    params: dict | None = None,
    queue: bool = True,
) -> None:
    """Record one event (once per ``key``) in the current transaction; fan it out after commit.

    ``queue=False`` leaves the fan-out to whoever records many events at once: a scheduling pass
    queues one ``fan_out_due`` for all of its events (``fan_out_due_queue``) instead of one task per
    start, which would cost the pass a broker round trip per workload."""
    Event.objects.bulk_create(
        [Event(key=key[:200], kind=kind, created_at=now, cluster_id=cluster_id, workload_id=workload_id,
               node_id=node_id, user_id=user_id, params=params or {})],
        ignore_conflicts=True,
    )  # fmt: skip
    if queue:
        transaction.on_commit(lambda: fan_out_queue(key[:200]), robust=True)


def fan_out_queue(key: str) -> None:
    from notifications.tasks import fan_out

    try:
        fan_out.apply_async(args=[key], queue=settings.NOTIFICATIONS_QUEUE)
    except Exception:  # the broker is down: the minutely sweep queues it again
        logger.exception("could not queue the fan-out of event %s", key)


def fan_out_due_queue() -> None:
    """Queue one fan-out of every event not fanned out yet (after a pass that recorded some)."""
    from notifications.tasks import fan_out_due

    try:
        fan_out_due.apply_async(queue=settings.NOTIFICATIONS_QUEUE)
    except Exception:  # the broker is down: the minutely sweep fans them out
        logger.exception("could not queue the fan-out of a pass's events")


def event_fan_out(*, key: str, now: datetime) -> list[int]:
    """Notifications and deliveries for the event; returns the ids of the deliveries to send (none
    when it was fanned out before: those are sent, or retried, by the tasks it queued then)."""
    with transaction.atomic():
        event = Event.objects.select_for_update().filter(key=key).first()
        if event is None or event.fanned_out_at is not None:
            return []
        message = message_for(event)
        event.subject, event.body, event.url = message.subject[:300], message.body, message.url[:500]
        event.fanned_out_at = now
        event.save(update_fields=["subject", "body", "url", "fanned_out_at"])
        _notify(event, recipients_for(event), now=now)
    return list(
        Delivery.objects.filter(event=event, status=DeliveryStatus.PENDING).values_list("id", flat=True)
    )


def deliveries_stranded(*, now: datetime, older_than_s: float = 300.0) -> list[int]:
    """Deliveries never claimed although their event was fanned out a while ago (the queueing of
    their send was lost, e.g. the broker was down)."""
    cutoff = now - timedelta(seconds=older_than_s)
    rows = Delivery.objects.filter(status=DeliveryStatus.PENDING, claimed_at__isnull=True,
                                   event__fanned_out_at__lt=cutoff).order_by("id")  # fmt: skip
    return list(rows.values_list("id", flat=True)[:500])


def _notify(event: Event, recipients: Iterable[Recipient], *, now: datetime) -> None:
    notes, deliveries = [], []
    for recipient in recipients:
        if recipient.user_id is not None and recipient.in_portal:
            notes.append(Notification(event=event, user_id=recipient.user_id, created_at=now))
        if recipient.email:
            deliveries.append(Delivery(event=event, channel=Channel.EMAIL, target=recipient.email))
        deliveries.extend(
            Delivery(event=event, channel=Channel.WEBHOOK, target=url) for url in recipient.webhooks
        )
    Notification.objects.bulk_create(notes, ignore_conflicts=True)
    Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)


def delivery_claim(*, delivery_id: int, now: datetime) -> Delivery | None:
    """Take the delivery for sending, or None when it is sent, failed, or another worker has it."""
    stale = now - timedelta(seconds=CLAIM_STALE_S)
    claimed = (
        Delivery.objects.filter(pk=delivery_id)
        .filter(Q(status=DeliveryStatus.PENDING) | Q(status=DeliveryStatus.SENDING, claimed_at__lt=stale))
        .update(status=DeliveryStatus.SENDING, claimed_at=now)
    )
    return Delivery.objects.select_related("event").get(pk=delivery_id) if claimed else None


def delivery_send(*, delivery_id: int, now: datetime, final: bool) -> str:
    """Send one claimed delivery; returns its status. Raises ``DeliveryFailed`` when it should be
    retried (``final`` False); on the last attempt the failure is recorded as ``failed``."""
    delivery = delivery_claim(delivery_id=delivery_id, now=now)
    if delivery is None:
        return "skipped"
    try:
        _send(delivery)
    except Exception as error:  # any failure of the channel: recorded, retried or given up
        status = DeliveryStatus.FAILED if final else DeliveryStatus.PENDING
        Delivery.objects.filter(pk=delivery_id).update(
            status=status,
            attempts=delivery.attempts + 1,
            last_error=f"{type(error).__name__}: {error}"[:2000],
        )
        if final:
            logger.warning("delivery %s failed for good: %s", delivery_id, error)
            return DeliveryStatus.FAILED
        raise DeliveryFailed(str(error)) from error
    Delivery.objects.filter(pk=delivery_id).update(
        status=DeliveryStatus.SENT, attempts=delivery.attempts + 1, sent_at=timezone.now(), last_error=""
    )
    return DeliveryStatus.SENT


class DeliveryFailed(Exception):
    """A send failed and may be retried."""


def _send(delivery: Delivery) -> None:
    event = delivery.event
    if delivery.channel == Channel.EMAIL:
        body = f"{event.body}\n\n{event.url}" if event.url else event.body
        send_mail(event.subject, body, settings.DEFAULT_FROM_EMAIL, [delivery.target], fail_silently=False)
        return
    response = requests.post(
        delivery.target,
        json=slack_payload(event),
        headers={"X-Idempotency-Key": event.key},
        timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_S,
    )
    response.raise_for_status()


def slack_payload(event: Event) -> dict:
    """Slack's incoming-webhook shape (Mattermost, Teams' Slack mode and Discord's /slack read it)."""
    link = f"\n<{event.url}|Open in the portal>" if event.url else ""
    return {"text": f"*{event.subject}*\n{event.body}{link}"}


def notifications_mark_read(*, user: User, ids: Iterable[int] | None = None, now: datetime) -> int:
    """Mark the user's unread notifications (all, or those ``ids``) read; returns how many."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=list(ids))
    return unread.update(read_at=now)


def events_unfanned(*, now: datetime, older_than_s: float = 60.0) -> list[str]:
    """Keys of events recorded at least ``older_than_s`` ago and not fanned out yet, oldest first."""
    cutoff = now - timedelta(seconds=older_than_s)
    rows = Event.objects.filter(fanned_out_at__isnull=True, created_at__lt=cutoff).order_by(
        "created_at", "id"
    )
    return list(rows.values_list("key", flat=True)[:500])


CHANNEL_FIELDS = ("in_portal", "email", "webhook")


@transaction.atomic
def preferences_set(*, user: User, data: dict[str, bool], webhook_url: str) -> None:
    """Store each kind's channels (``data["<kind>.<channel>"]``) and the user's one webhook URL
    ("" removes it). The URL is validated by the caller's form."""
    from notifications.models import Preference, Webhook

    for kind in EventKind.values:
        Preference.objects.update_or_create(
            user=user,
            kind=kind,
            defaults={field: bool(data.get(f"{kind}.{field}")) for field in CHANNEL_FIELDS},
        )
    Webhook.objects.filter(user=user).delete()
    if webhook_url:
        Webhook.objects.create(user=user, url=webhook_url)


@transaction.atomic
def node_webhooks_set(*, managed: Iterable[BudgetNode], urls: dict[int, str]) -> None:
    """Set the one webhook of each node in ``managed`` (the caller's managed nodes) from ``urls``
    by node id; "" removes it. Nodes the caller does not manage are never touched."""
    from notifications.models import Webhook

    for node in managed:
        url = urls.get(node.pk, "")
        Webhook.objects.filter(node=node).delete()
        if url:
            Webhook.objects.create(node=node, url=url)
