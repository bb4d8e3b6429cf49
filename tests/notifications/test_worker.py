"""Notifications through a real Celery worker on Redis (marker ``celery``): once per event, retried."""

from __future__ import annotations

import time

import pytest
from django.db import transaction
from django.utils import timezone

from notifications.models import Delivery, Event, EventKind, Notification, Webhook
from notifications.services import event_record
from scheduling.models import Workload
from scheduling.tasks import run_scheduling_pass
from tests.notifications.receiver import receiver_running
from tests.scheduling.conftest import build_lab
from tests.scheduling.processes import wait_for
from tests.scheduling.test_celery_worker import submit
from tests.workers import unique_queue, worker_running

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def fast_retries(queue: str) -> dict[str, str]:
    return {"NOTIFICATIONS_QUEUE": queue, "NOTIFY_WEBHOOK_BACKOFF_S": "1", "NOTIFY_WEBHOOK_RETRIES": "4",
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend"}  # fmt: skip


def test_a_webhook_that_fails_twice_then_succeeds_is_delivered_exactly_once(settings):
    queue = unique_queue("notify")
    settings.NOTIFICATIONS_QUEUE = queue
    lab = build_lab()
    with (
        receiver_running(failures_first=2) as receiver,
        worker_running(queue, **fast_retries(queue)) as worker,
    ):
        Webhook.objects.create(node=lab.vision, url=receiver.url)
        with transaction.atomic():
            event_record(kind=EventKind.UNDER_OWED, key="under_owed:test:1", now=timezone.now(), cluster_id=lab.main.pk,
                         node_id=lab.perception.pk, params={"delivered_gpu_h": 80.0, "owed_gpu_h": 100.0, "ratio": 0.8})  # fmt: skip
        wait_for(lambda: Delivery.objects.filter(status="sent").exists(), timeout=60, what="the webhook to succeed",
                 process=worker)  # fmt: skip
        time.sleep(3)  # time enough for a wrongful second send to arrive
    (delivery,) = Delivery.objects.all()
    assert (delivery.channel, delivery.target, delivery.attempts) == ("webhook", receiver.url, 3)
    assert [status for _, _, status in receiver.requests] == [500, 500, 200]
    assert {key for key, _, _ in receiver.requests} == {
        "under_owed:test:1"
    }  # the same idempotency key each time
    ((_, body),) = receiver.delivered()
    assert "lab/vision/perception got 80% of what it was owed" in body["text"]
    assert Notification.objects.filter(user=lab.alice, event__key="under_owed:test:1").count() == 1


def test_a_webhook_that_never_answers_is_recorded_as_failed_without_blocking_passes(settings):
    queue = unique_queue("notify")
    settings.NOTIFICATIONS_QUEUE = queue
    lab = build_lab()
    env = {**fast_retries(queue), "NOTIFY_WEBHOOK_RETRIES": "1"}
    with receiver_running(failures_first=100) as receiver, worker_running(queue, **env) as worker:
        Webhook.objects.create(user=lab.bob, url=receiver.url)
        workload = submit(lab.bob, "lab/vision/perception", 1, metadata={"duration_s": 600})

        def started_and_given_up() -> bool:
            run_scheduling_pass.apply_async(args=[lab.main.pk], queue=queue, expires=5)
            time.sleep(0.5)
            return Delivery.objects.filter(status="failed").exists()

        wait_for(started_and_given_up, timeout=90, what="the delivery to fail for good", process=worker)
    assert Workload.objects.get(pk=workload).state == "running"  # the pass went on regardless
    delivery = Delivery.objects.get(status="failed")
    assert delivery.attempts == 2 and "500" in delivery.last_error
    assert len(receiver.requests) == 2


def test_one_notification_per_event_across_a_worker_restart(settings):
    """The pass records "started" once per attempt; passes after a worker restart (and the same
    event recorded again) add no second notification, e-mail or webhook call."""
    queue = unique_queue("notify")
    settings.NOTIFICATIONS_QUEUE = queue
    lab = build_lab()
    lab.bob.email = "bob@example.org"
    lab.bob.save()
    with receiver_running() as receiver:
        Webhook.objects.create(user=lab.bob, url=receiver.url)
        first = submit(lab.bob, "lab/vision/perception", 1, metadata={"duration_s": 600})
        with worker_running(queue, **fast_retries(queue)) as worker:
            passes_until(lambda: len(receiver.delivered()) == 1, queue=queue, cluster_id=lab.main.pk, worker=worker,
                         what="the first start to be told")  # fmt: skip
        # The worker is gone: the pass re-records the same start (as a retried pass would) and a
        # second workload waits, its notification queued for whichever worker comes next.
        with transaction.atomic():
            event_record(kind=EventKind.STARTED, key=f"started:{first}:1", now=timezone.now(),
                         cluster_id=lab.main.pk, workload_id=first)  # fmt: skip
        second = submit(lab.bob, "lab/vision/perception", 1, metadata={"duration_s": 600})
        with worker_running(queue, **fast_retries(queue)) as worker:
            passes_until(lambda: len(receiver.delivered()) == 2, queue=queue, cluster_id=lab.main.pk, worker=worker,
                         what="the second start to be told")  # fmt: skip
            for _ in range(4):  # more passes, nothing new to tell
                run_scheduling_pass.apply_async(args=[lab.main.pk], queue=queue, expires=5)
            time.sleep(4)
    started = Event.objects.filter(kind="started").order_by("key")
    assert [e.key for e in started] == [f"started:{first}:1", f"started:{second}:1"]
    assert Notification.objects.filter(user=lab.bob, event__kind="started").count() == 2
    assert sorted(key for key, _ in receiver.delivered()) == [f"started:{first}:1", f"started:{second}:1"]
    assert len(receiver.requests) == 2
    # e-mail is off by default for "started"; the bell and the webhook carry it
    assert not Delivery.objects.filter(channel="email").exists()


def passes_until(condition, *, queue: str, cluster_id: int, worker, what: str) -> None:  # noqa: ANN001
    def tick() -> bool:
        run_scheduling_pass.apply_async(args=[cluster_id], queue=queue, expires=5)
        time.sleep(0.5)
        return condition()

    wait_for(tick, timeout=90, what=what, process=worker)
