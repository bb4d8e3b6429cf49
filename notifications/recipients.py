"""Who is told about an event, and on which channels (reads only).

- workload events (started, preempted, protection ending, held, start refused): the owner;
- an allocation under owed: the managers of the node and of its ancestors;
- a digest: the one manager it was written for;
- on-call events (availability, backend, passes): active staff.
Each user's channels come from their ``Preference`` for the kind (else ``DEFAULT_CHANNELS``); their
own webhooks follow the same preference. Node webhooks of the event's budget node and its ancestors
are told about every event of that subtree they subscribe to (no user, no preference).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from budgets.models import BudgetNode, Membership, Role
from notifications.models import DEFAULT_CHANNELS, Event, EventKind, Preference, Webhook

WORKLOAD_KINDS = {
    EventKind.STARTED, EventKind.PREEMPTED, EventKind.PROTECTION_ENDING, EventKind.HELD, EventKind.START_REFUSED,
}  # fmt: skip
ONCALL_KINDS = {EventKind.AVAILABILITY_LOW, EventKind.BACKEND_UNAVAILABLE, EventKind.PASSES_FAILING}


@dataclass
class Recipient:
    user_id: int | None
    in_portal: bool = False
    email: str = ""
    webhooks: list[str] = field(default_factory=list)


def recipient_user_ids(event: Event) -> list[int]:
    if event.kind in WORKLOAD_KINDS:
        owner = event.workload.owner_id if event.workload is not None else None
        return [owner] if owner else []
    if event.kind == EventKind.UNDER_OWED:
        return managers_of(event.node) if event.node is not None else []
    if event.kind == EventKind.WEEKLY_DIGEST:
        return [event.user_id] if event.user_id else []
    if event.kind in ONCALL_KINDS:
        staff = get_user_model().objects.filter(is_staff=True, is_active=True).order_by("id")
        return list(staff.values_list("id", flat=True))
    return []


def lineage(node: BudgetNode) -> list[str]:
    """The node's path and its ancestors' paths: a/b/c -> [a, a/b, a/b/c]."""
    parts = node.path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def managers_of(node: BudgetNode) -> list[int]:
    memberships = Membership.objects.filter(
        role=Role.MANAGER, node__path__in=lineage(node), user__is_active=True
    )
    return sorted(set(memberships.values_list("user_id", flat=True)))


def _event_node(event: Event) -> BudgetNode | None:
    if event.node is not None:
        return event.node
    workload = event.workload
    if workload is not None and workload.allocation_id:
        return workload.allocation
    return None


def recipients_for(event: Event) -> list[Recipient]:
    """Each user with the channels they want for this kind, then the subtree's node webhooks."""
    users = get_user_model().objects.in_bulk(recipient_user_ids(event))
    preferences = {p.user_id: p for p in Preference.objects.filter(user_id__in=list(users), kind=event.kind)}
    hooks: dict[int, list[str]] = {}
    for hook in Webhook.objects.filter(user_id__in=list(users), active=True):
        if hook.user_id is not None and hook.wants(event.kind):  # always a user's: filtered by user_id
            hooks.setdefault(hook.user_id, []).append(hook.url)
    recipients = []
    for user_id in sorted(users):
        wanted = preferences.get(user_id) or Preference(**DEFAULT_CHANNELS[event.kind])
        recipients.append(Recipient(
            user_id=user_id, in_portal=wanted.in_portal,
            email=users[user_id].email if wanted.email and users[user_id].email else "",
            webhooks=hooks.get(user_id, []) if wanted.webhook else [],
        ))  # fmt: skip
    node = _event_node(event)
    if node is not None:
        node_hooks = Webhook.objects.filter(node__path__in=lineage(node), active=True).order_by("id")
        urls = [hook.url for hook in node_hooks if hook.wants(event.kind)]
        if urls:
            recipients.append(Recipient(user_id=None, webhooks=urls))
    return recipients
