"""Celery entry points of notifications: thin, they call the services and own only the retries."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from notifications import checks
from notifications.services import (
    DeliveryFailed,
    deliveries_stranded,
    delivery_send,
    event_fan_out,
    events_unfanned,
    fan_out_queue,
)


@shared_task(name="notifications.fan_out", ignore_result=True)
def fan_out(key: str) -> int:
    """Write the event's notifications and deliveries, then queue one send per delivery."""
    pending = event_fan_out(key=key, now=timezone.now())
    for delivery_id in pending:
        deliver.apply_async(args=[delivery_id], queue=settings.NOTIFICATIONS_QUEUE)
    return len(pending)


@shared_task(name="notifications.fan_out_due", ignore_result=True)
def fan_out_due() -> int:
    """Fan out every event not fanned out yet (a pass's starts and preemptions), oldest first."""
    count = 0
    for key in events_unfanned(now=timezone.now(), older_than_s=0.0):
        count += fan_out(key)
    return count


@shared_task(name="notifications.deliver", bind=True, ignore_result=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:  # noqa: ANN001 - Celery's bound task
    """Send one e-mail or webhook POST; a failure is retried after BACKOFF * 2**n seconds, up to
    NOTIFY_WEBHOOK_RETRIES times, then recorded as failed. It never runs inside a pass."""
    retries = settings.NOTIFY_WEBHOOK_RETRIES
    final = self.request.retries >= retries
    try:
        return delivery_send(delivery_id=delivery_id, now=timezone.now(), final=final)
    except DeliveryFailed as error:
        countdown = settings.NOTIFY_WEBHOOK_BACKOFF_S * 2**self.request.retries
        raise self.retry(exc=error, countdown=countdown, max_retries=retries) from error


@shared_task(name="notifications.check_minutely", ignore_result=True)
def check_minutely() -> dict[str, int]:
    """Beat, every minute: protection ending, availability, failing passes; re-queue lost fan-outs."""
    now = timezone.now()
    lost = events_unfanned(now=now)
    for key in lost:
        fan_out_queue(key)
    stranded = deliveries_stranded(now=now)
    for delivery_id in stranded:
        deliver.apply_async(args=[delivery_id], queue=settings.NOTIFICATIONS_QUEUE)
    return {
        "protection_ending": checks.protection_ending_check(now=now),
        "availability_low": checks.availability_check(now=now),
        "passes_failing": checks.passes_failing_check(now=now),
        "requeued": len(lost) + len(stranded),
    }


@shared_task(name="notifications.check_under_owed", ignore_result=True)
def check_under_owed() -> int:
    return checks.under_owed_check(now=timezone.now())


@shared_task(name="notifications.weekly_digest", ignore_result=True)
def weekly_digest() -> int:
    return checks.weekly_digest(now=timezone.now())
