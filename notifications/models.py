"""Notifications: events, who is told about them, how, and what each person wants.

- ``Event``: one thing that happened, recorded once (``key`` is unique: the idempotency key), in the
  transaction that recorded the thing itself (a run opened, a workload held, a pass found the
  backend down). Only the row is written there; who is told and how is worked out after commit.
- ``Notification``: the event in one user's bell (one per event and user).
- ``Delivery``: one e-mail or webhook POST for an event (one per event, channel and target), with
  its attempts and last error; it is claimed with a conditional UPDATE before it is sent.
- ``Preference``: a user's channels for one kind of event (absent: ``DEFAULT_CHANNELS``).
- ``Webhook``: a Slack-compatible incoming-webhook URL of a user, or of a budget node (then its
  managers' events for that subtree, and the subtree's workload events, go there).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class EventKind(models.TextChoices):
    STARTED = "started", "Workload started"
    PREEMPTED = "preempted", "Workload preempted"
    PROTECTION_ENDING = "protection_ending", "Protection ends soon"
    HELD = "held", "Workload held"
    START_REFUSED = "start_refused", "Start refused by the backend"
    UNDER_OWED = "under_owed", "Allocation under 95% of owed (managers)"
    WEEKLY_DIGEST = "weekly_digest", "Weekly delivery digest (managers)"
    AVAILABILITY_LOW = "availability_low", "Availability below threshold (on-call)"
    BACKEND_UNAVAILABLE = "backend_unavailable", "Backend unavailable (on-call)"
    PASSES_FAILING = "passes_failing", "Scheduling passes failing (on-call)"


class Channel(models.TextChoices):
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


# What a user gets for a kind they never set: everything in the bell; e-mail for what needs acting on.
DEFAULT_CHANNELS: dict[str, dict[str, bool]] = {
    kind: {"in_portal": True, "email": kind not in (EventKind.STARTED,), "webhook": True}
    for kind in EventKind.values
}


class Event(models.Model):
    key = models.CharField(max_length=200, unique=True)  # the idempotency key, e.g. "started:42:1"
    kind = models.CharField(max_length=30, choices=EventKind.choices)
    created_at = models.DateTimeField()
    cluster = models.ForeignKey(
        "scheduling.Cluster", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    workload = models.ForeignKey(
        "scheduling.Workload", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    node = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    params = models.JSONField(default=dict, blank=True)
    subject = models.CharField(max_length=300, blank=True)  # written when the event is fanned out
    body = models.TextField(blank=True)
    url = models.CharField(max_length=500, blank=True)
    fanned_out_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["fanned_out_at", "created_at"], name="event_fan_out_due")]

    def __str__(self) -> str:
        return self.key


class Notification(models.Model):
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="notifications")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    created_at = models.DateTimeField()
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["event", "user"], name="one_notification_per_event_user")
        ]
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread")]

    def __str__(self) -> str:
        return f"{self.event_id} -> {self.user_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(max_length=500)  # an e-mail address or a webhook URL
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "channel", "target"], name="one_delivery_per_event_target"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.target} ({self.status})"


class Preference(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preferences"
    )
    kind = models.CharField(max_length=30, choices=EventKind.choices)
    in_portal = models.BooleanField(default=True)
    email = models.BooleanField(default=True)
    webhook = models.BooleanField(default=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="one_preference_per_user_kind")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind}"


class Webhook(models.Model):
    """Exactly one of ``user`` and ``node`` is set; ``kinds`` empty means every kind."""

    url = models.URLField(max_length=500)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="webhooks"
    )
    node = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.CASCADE, related_name="webhooks"
    )
    kinds = models.JSONField(default=list, blank=True)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, node__isnull=True)
                | models.Q(user__isnull=True, node__isnull=False),
                name="webhook_of_a_user_or_a_node",
            )
        ]

    def __str__(self) -> str:
        return self.url

    def wants(self, kind: str) -> bool:
        return self.active and (not self.kinds or kind in self.kinds)
