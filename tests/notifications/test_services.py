"""Events, who hears of them, the checks beat runs, and the pages (no worker: services called directly)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.test import Client

from notifications import checks
from notifications.models import Delivery, Event, EventKind, Notification, Preference, Webhook
from notifications.services import delivery_send, event_fan_out, event_record
from scheduling.models import AllocationHour, Node, PassStatus, Run, SchedulingPass, Workload
from scheduling.services.runs import run_close, run_open
from scheduling.services.workloads import workload_hold

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def workload(lab, user, **extra) -> Workload:  # noqa: ANN001
    fields = {"cluster": lab.main, "allocation": lab.perception, "owner": user, "user_name": user.username,
              "gpus": 8, "state_changed_at": NOW, "submitted_at": NOW, "queued_at": NOW, **extra}  # fmt: skip
    return Workload.objects.create(**fields)


def fan_out_all() -> None:
    for key in Event.objects.filter(fanned_out_at__isnull=True).values_list("key", flat=True):
        event_fan_out(key=key, now=NOW)


def client_for(user) -> Client:  # noqa: ANN001
    client = Client()
    client.force_login(user)
    return client


def test_a_run_opened_twice_records_one_started_event_for_its_owner(lab, django_capture_on_commit_callbacks):
    w = workload(lab, lab.bob)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        for _ in range(2):
            run_open(
                workload=w, attempt=1, placement=[["n0", 8]], started_at=NOW, protected_until=NOW, funded=True
            )
    assert Event.objects.get().key == f"started:{w.pk}:1"
    assert queued == []  # no task per start: the pass queues one fan-out for all its events
    fan_out_all()
    (note,) = Notification.objects.all()
    assert note.user == lab.bob and "Started: workload" in note.event.subject


def test_a_preemption_says_what_was_lost_and_whether_it_was_requeued(lab):
    kept = workload(lab, lab.bob, resumable=True, checkpoint_interval_s=1800)
    ended = workload(lab, lab.dave, allocation=lab.language, gpus=4)
    unknown = workload(lab, lab.alice, allocation=lab.vision, gpus=2, resumable=True)
    for w in (kept, ended, unknown):
        run, _ = run_open(
            workload=w, attempt=1, placement=[], started_at=NOW, protected_until=NOW, funded=True
        )
        run_close(run=run, ended_at=NOW + timedelta(hours=3, minutes=10), reason="preempted")
    fan_out_all()
    bob = Notification.objects.get(user=lab.bob, event__kind="preempted").event
    dave = Notification.objects.get(user=lab.dave, event__kind="preempted").event
    alice = Notification.objects.get(user=lab.alice, event__kind="preempted").event
    # checkpoints every 30 min from the start: the last one at 3 h, 10 min before; 8 GPUs x 10 min
    assert (
        "preempted after 3 h 10 min; it resumes from its last checkpoint (10 min ago, about 1.3 GPU-hours lost)"
        in bob.body
    )
    assert "requeued" in bob.body
    assert "it ended; about 12.7 GPU-hours of work were lost" in dave.body  # 4 GPUs x 3 h 10 min
    assert "no checkpoint interval declared" in alice.body


def test_holding_a_workload_tells_its_owner_with_the_note(lab):
    w = workload(lab, lab.bob)
    workload_hold(workload=w, actor=lab.alice, note="maintenance", now=NOW)
    fan_out_all()
    (note,) = Notification.objects.filter(user=lab.bob)
    assert "held by alice" in note.event.body and "maintenance" in note.event.body


def test_protection_ending_is_told_once_interactive_sessions_first(lab, settings):
    batch = workload(lab, lab.bob)
    session = workload(lab, lab.dave, allocation=lab.language, workload_class="interactive")
    later = workload(lab, lab.bob)
    for w, minutes in ((batch, 5), (session, 10), (later, 60)):
        run_open(workload=w, attempt=1, placement=[], started_at=NOW - timedelta(hours=1),
                 protected_until=NOW + timedelta(minutes=minutes), funded=True)  # fmt: skip
    Event.objects.all().delete()
    assert checks.protection_ending_check(now=NOW) == 2
    assert checks.protection_ending_check(now=NOW + timedelta(minutes=1)) == 2  # checked again...
    events = list(Event.objects.order_by("id"))
    assert [e.workload_id for e in events] == [session.pk, batch.pk]  # ...told once, the session first
    assert events[0].params["minutes"] == 10


def test_a_session_is_warned_by_its_clusters_knob_once_per_end_of_protection_and_again_after_renewing(lab):
    from scheduling.models import Cluster, ProtectionRenewal

    Cluster.objects.filter(pk=lab.main.pk).update(session_warning_min=20)
    session = workload(lab, lab.dave, allocation=lab.language, workload_class="interactive", state="running")
    batch = workload(lab, lab.bob, state="running")
    for w in (session, batch):
        run_open(workload=w, attempt=1, placement=[], started_at=NOW - timedelta(hours=1),
                 protected_until=NOW + timedelta(minutes=18), funded=True)  # fmt: skip
    Event.objects.all().delete()

    assert checks.protection_ending_check(now=NOW) == 1  # the session (20 min); batch waits for 15 min
    assert checks.protection_ending_check(now=NOW + timedelta(minutes=1)) == 1  # checked again: told once
    assert Event.objects.filter(kind=EventKind.PROTECTION_ENDING).count() == 1
    fan_out_all()
    told = Event.objects.get(kind=EventKind.PROTECTION_ENDING)
    assert told.workload_id == session.pk and f"gpus renew {session.pk}" in told.body
    assert "(2 renewals left in 24 hours)" in told.body

    run = Run.objects.get(workload=session)  # the owner renews: a new end of protection, a new warning
    ProtectionRenewal.objects.create(workload=session, run=run, at=NOW, actor="dave",
                                     protected_before=run.protected_until, protected_until=NOW + timedelta(hours=8))  # fmt: skip
    Run.objects.filter(pk=run.pk).update(protected_until=NOW + timedelta(hours=8))
    assert checks.protection_ending_check(now=NOW + timedelta(hours=7, minutes=45)) == 1
    assert Event.objects.filter(kind=EventKind.PROTECTION_ENDING, workload=session).count() == 2


def test_a_manager_hears_when_an_allocation_delivers_under_95_percent_of_owed(lab):
    for hours_ago in range(1, 25):
        hour = NOW - timedelta(hours=hours_ago)
        AllocationHour.objects.create(cluster=lab.main, allocation=lab.perception, hour=hour,
                                      delivered_gpu_s=0.9 * 8 * 3600, owed_gpu_s=8 * 3600)  # fmt: skip
        AllocationHour.objects.create(cluster=lab.main, allocation=lab.language, hour=hour,
                                      delivered_gpu_s=0.97 * 8 * 3600, owed_gpu_s=8 * 3600)  # fmt: skip
    assert checks.under_owed_check(now=NOW) == 1
    checks.under_owed_check(now=NOW + timedelta(hours=1))  # the same day: no second event
    fan_out_all()
    (note,) = Notification.objects.all()
    assert note.user == lab.alice  # manager of vision, above perception; dave (a member) hears nothing
    assert "lab/vision/perception got 90% of what it was owed" in note.event.subject


def test_the_weekly_digest_lists_each_managed_subtree(lab):
    AllocationHour.objects.create(cluster=lab.main, allocation=lab.perception, hour=NOW - timedelta(days=1),
                                  delivered_gpu_s=50 * 3600, owed_gpu_s=100 * 3600)  # fmt: skip
    assert checks.weekly_digest(now=NOW) == 1
    fan_out_all()
    (note,) = Notification.objects.filter(user=lab.alice)
    assert "lab/vision on main: 50 / 100 GPU-hours (50%)" in note.event.body


def test_on_call_hears_of_low_availability_a_long_outage_and_failing_passes(lab, settings):
    Node.objects.filter(name__in=["n0", "n1"]).update(healthy=False)
    assert checks.availability_check(now=NOW) == 1
    for minutes_ago in (7, 4, 1):
        SchedulingPass.objects.create(cluster=lab.main, started_at=NOW - timedelta(minutes=minutes_ago),
                                      status=PassStatus.BACKEND_UNAVAILABLE)  # fmt: skip
    assert checks.backend_unavailable_check(cluster=lab.main, now=NOW, error="slurmctld timed out")
    assert checks.backend_unavailable_check(cluster=lab.main, now=NOW + timedelta(minutes=1), error="again")
    for _ in range(3):
        SchedulingPass.objects.create(
            cluster=lab.main, started_at=NOW, status=PassStatus.FAILED, error="KeyError: 7"
        )
    assert checks.passes_failing_check(now=NOW) == 1
    fan_out_all()
    kinds = sorted(Notification.objects.filter(user=lab.oscar).values_list("event__kind", flat=True))
    assert kinds == ["availability_low", "backend_unavailable", "passes_failing"]
    assert not Notification.objects.exclude(user=lab.oscar).exists()  # staff only
    outage = Event.objects.get(kind="backend_unavailable")
    assert "unavailable for 7 min" in outage.subject


def test_a_short_outage_is_not_told(lab):
    SchedulingPass.objects.create(cluster=lab.main, started_at=NOW - timedelta(minutes=2),
                                  status=PassStatus.BACKEND_UNAVAILABLE)  # fmt: skip
    assert not checks.backend_unavailable_check(cluster=lab.main, now=NOW, error="timeout")


def test_preferences_choose_the_channels_and_node_webhooks_hear_their_subtree(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    lab.bob.email = "bob@example.org"
    lab.bob.save()
    Preference.objects.create(user=lab.bob, kind=EventKind.HELD, in_portal=False, email=True, webhook=False)
    Webhook.objects.create(user=lab.bob, url="http://127.0.0.1:9/bob")
    Webhook.objects.create(node=lab.vision, url="http://127.0.0.1:9/vision", kinds=["held"])
    Webhook.objects.create(node=lab.language, url="http://127.0.0.1:9/language")
    workload_hold(workload=workload(lab, lab.bob), actor=lab.alice, now=NOW)
    fan_out_all()
    assert not Notification.objects.exists()
    targets = sorted(Delivery.objects.values_list("channel", "target"))
    assert targets == [("email", "bob@example.org"), ("webhook", "http://127.0.0.1:9/vision")]
    email = Delivery.objects.get(channel="email")
    assert delivery_send(delivery_id=email.pk, now=NOW, final=True) == "sent"
    assert delivery_send(delivery_id=email.pk, now=NOW, final=True) == "skipped"  # sent once
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["bob@example.org"]


def test_an_event_recorded_in_a_transaction_that_rolls_back_is_not_recorded(lab):
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        event_record(kind=EventKind.HELD, key="held:x", now=NOW)
        raise RuntimeError("the pass failed")
    assert not Event.objects.exists()


def test_the_bell_counts_unread_and_the_list_marks_them_read(lab):
    for index in range(3):
        event = Event.objects.create(key=f"k{index}", kind="held", created_at=NOW, subject=f"subject {index}")
        Notification.objects.create(event=event, user=lab.bob, created_at=NOW)
    other = Notification.objects.create(event=Event.objects.get(key="k0"), user=lab.dave, created_at=NOW)
    client = client_for(lab.bob)
    assert 'id="bell-count">3<' in client.get("/notifications/bell/").content.decode()
    page = client.get("/notifications/").content.decode()
    assert "subject 2" in page and "Mark all 3 read" in page
    first = Notification.objects.filter(user=lab.bob).order_by("id").first()
    client.post("/notifications/read/", {"id": first.pk})
    client.post("/notifications/read/", {"id": other.pk})  # someone else's: no effect
    assert 'id="bell-count">2<' in client.get("/notifications/bell/").content.decode()
    assert Notification.objects.get(pk=other.pk).read_at is None
    client.post("/notifications/read/")
    assert "bell-count" not in client.get("/notifications/bell/").content.decode()
    assert 'id="bell"' in client.get("/").content.decode()  # every page's header loads the bell


def test_preferences_page_saves_channels_and_refuses_a_bad_webhook_url(lab):
    client = client_for(lab.bob)
    bad = client.post("/notifications/preferences/", {"webhook_url": "not a url", "held.email": "on"})
    assert bad.status_code == 400 and "Enter a full http:// or https:// URL" in bad.content.decode()
    client.post(
        "/notifications/preferences/", {"webhook_url": "https://hooks.example.org/x", "held.in_portal": "on"}
    )
    held = Preference.objects.get(user=lab.bob, kind="held")
    assert (held.in_portal, held.email, held.webhook) == (True, False, False)
    assert Webhook.objects.get(user=lab.bob).url == "https://hooks.example.org/x"


def test_runs_closed_for_other_reasons_tell_nobody(lab):
    run, _ = run_open(workload=workload(lab, lab.bob), attempt=1, placement=[], started_at=NOW,
                      protected_until=NOW, funded=True)  # fmt: skip
    Event.objects.all().delete()
    run_close(run=run, ended_at=NOW + timedelta(hours=1), reason="completed")
    assert not Event.objects.exists() and Run.objects.get().end_reason == "completed"


def test_a_pass_that_starts_several_workloads_queues_one_fan_out_for_all(
    lab, django_capture_on_commit_callbacks
):
    from scheduling.passes import run_pass
    from scheduling.services import workload_submit
    from tests.scheduling.conftest import T0

    for _ in range(3):
        workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=2,
                        now=T0, metadata={"duration_s": 600})  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False) as queued:
        run_pass(cluster_id=lab.main.pk, now=T0 + timedelta(seconds=10))
    assert Event.objects.filter(kind="started").count() == 3
    fan_outs = [callback for callback in queued if getattr(callback, "__name__", "") == "fan_out_due_queue"]
    assert len(fan_outs) == 1


def test_a_manager_sets_the_webhook_of_a_node_they_manage_and_no_other(lab):
    client = client_for(lab.alice)
    page = client.get("/notifications/preferences/").content.decode()
    assert f'name="node-{lab.vision.pk}"' in page and f'name="node-{lab.language.pk}"' not in page
    bad = client.post("/notifications/preferences/", {f"node-{lab.vision.pk}": "ftp://x"})
    assert bad.status_code == 400 and f'id="node-{lab.vision.pk}-errors"' in bad.content.decode()
    client.post("/notifications/preferences/", {f"node-{lab.vision.pk}": "https://hooks.example.org/vision",
                                                f"node-{lab.language.pk}": "https://evil.example.org/"})  # fmt: skip
    assert list(Webhook.objects.values_list("node__path", "url")) == [
        ("lab/vision", "https://hooks.example.org/vision")
    ]


def test_a_refused_start_is_told_once_per_streak_and_the_hold_after_three(lab):
    from scheduling.dispatch import _count_refused_start

    w = workload(lab, lab.bob)
    for second in range(3):
        _count_refused_start(w.pk, "QOSMaxGRESPerUser", now=NOW + timedelta(seconds=10 * second))
    fan_out_all()
    kinds = sorted(Notification.objects.filter(user=lab.bob).values_list("event__kind", flat=True))
    assert kinds == ["held", "start_refused"]
    refused = Event.objects.get(kind="start_refused")
    assert "refused to start your workload" in refused.body and "QOSMaxGRESPerUser" in refused.body
    assert "held by scheduler" in Event.objects.get(kind="held").body
