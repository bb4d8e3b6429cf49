"""Cancel, hold, release, renew (an interactive session's protection) and "resubmit like this" from
the pages: thin POST views over the services.

Access is checked by the one getter (``workload_get_for_user(act=True)``: 403 for anyone but the
owner, a manager of the allocation and staff). htmx posts get the workload's status fragment back
(with what happened, or the refusal) and an ``HX-Trigger: workload-changed`` so the queue and the
options re-read themselves; plain posts (no JavaScript) are redirected with a message.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from portal.requests import HtmxHttpRequest
from scheduling import reports
from scheduling.models import Workload
from scheduling.selectors import may_act_on, workload_get_for_user
from scheduling.services import (
    IllegalTransition,
    RenewalRefused,
    SubmissionRefused,
    workload_cancel,
    workload_hold,
    workload_release,
    workload_renew_protection,
    workload_resubmit,
)

CHANGED = "workload-changed"  # the htmx event the queue rows and the start options listen for
DONE = {"cancel": "Cancelled.", "hold": "Held: it will not start until released.", "release": "Released."}


def _act(verb: str, workload: Workload, request: HttpRequest) -> str:
    """Do ``verb``; returns what happened, in words."""
    if verb == "renew":
        renewed = workload_renew_protection(workload=workload, actor=request.user)
        return (
            f"Protection renewed until {renewed.protected_until:%Y-%m-%d %H:%M} UTC "
            f"({renewed.renewals_left} renewal{'s' if renewed.renewals_left != 1 else ''} left in 24 hours)."
        )
    if verb == "cancel":
        workload_cancel(workload=workload, actor=request.user)
    elif verb == "hold":
        workload_hold(workload=workload, actor=request.user, note=request.POST.get("note", "")[:500])
    else:
        workload_release(workload=workload, actor=request.user)
    return DONE[verb]


@login_required
@require_POST
def workload_action(request: HtmxHttpRequest, workload_id: int, verb: str) -> HttpResponse:
    item = workload_get_for_user(user=request.user, workload_id=workload_id, act=True)
    try:
        notice, ok = _act(verb, item, request), True
    except IllegalTransition as refused:
        notice, ok = str(refused).capitalize() + ".", False
    except RenewalRefused as refused:
        notice, ok = f"Not renewed: {refused}", False
    if request.htmx:
        return _status_fragment(request, workload_id, notice=notice, ok=ok)
    (messages.success if ok else messages.error)(request, f"Workload {workload_id}: {notice}")
    return redirect(_next_url(request, workload_id))


def _status_fragment(request: HttpRequest, workload_id: int, *, notice: str, ok: bool) -> HttpResponse:
    item = workload_get_for_user(user=request.user, workload_id=workload_id)
    now = timezone.now()
    context = {"d": reports.workload_detail(workload=item, now=now), "w": item, "now": now,
               "may_act": may_act_on(request.user, item), "notice": notice, "notice_ok": ok}  # fmt: skip
    response = render(request, "scheduling/_workload_status.html", context)
    response["HX-Trigger"] = CHANGED
    return response


def _next_url(request: HttpRequest, workload_id: int) -> str:
    """Back where the form was (the queue with its filters), if that is this site; else the workload."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return reverse("scheduling:workload", args=[workload_id])


def parse_changes(raw: str) -> dict[str, object]:
    """The start option's changes as posted (JSON object); anything else is no change at all."""
    try:
        changes = json.loads(raw)
    except ValueError:
        return {}
    return changes if isinstance(changes, dict) else {}


@login_required
@require_POST
def workload_resubmit_view(request: HtmxHttpRequest, workload_id: int) -> HttpResponse:
    """A new workload with one start option's change, the old one cancelled: after a confirm.

    htmx asks with ``hx-confirm``; without JavaScript the first post shows a confirm page whose
    button posts again with ``confirmed=yes``.
    """
    item = workload_get_for_user(user=request.user, workload_id=workload_id, act=True)
    changes = parse_changes(request.POST.get("changes", ""))
    label = request.POST.get("label", "")[:100]
    if not request.htmx and request.POST.get("confirmed") != "yes":
        context = {"w": item, "changes": request.POST.get("changes", ""), "label": label}
        return render(request, "scheduling/resubmit_confirm.html", context)
    try:
        result = workload_resubmit(workload=item, actor=request.user, changes=changes)
    except (IllegalTransition, SubmissionRefused) as refused:
        if request.htmx:
            return _status_fragment(request, workload_id, notice=str(refused), ok=False)
        messages.error(request, f"Workload {workload_id} was not resubmitted: {refused}")
        return redirect("scheduling:workload", workload_id=workload_id)
    new = result.workload
    messages.success(request, f"Workload {new.pk} submitted {label}; workload {workload_id} cancelled.")
    for warning in result.warnings:
        messages.warning(request, warning)
    target = reverse("scheduling:workload", args=[new.pk])
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Redirect": target})
    return redirect(target)
