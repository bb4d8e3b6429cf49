"""Every page, for every persona, reads as a researcher would: no raw internals in the text.

The demo organisation with two weeks of history, after a few real scheduling passes (so there
are pending reasons of several kinds, reservations and preemption protections). Each page's
visible text (not its tooltips, attributes or chart data) must hold no Unix timestamp, no
upper-case reason code, and never "0 workloads ... ahead".
"""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.test import Client

from budgets.models import BudgetNode
from scheduling.models import Decision, DecisionKind, PendingReason, Workload, WorkloadState
from scheduling.policy import ReasonCode
from tests.demo_world import demo_lived_in

PERSONAS = ("researcher", "manager", "oncall", "admin")
UNIX_TIMESTAMP = re.compile(r"(?<![\d.])1[5-9]\d{8}(?:\.\d+)?(?![\d])")
REASON_CODE = re.compile(r"\b(?:" + "|".join(code.value for code in ReasonCode) + r")\b")
NO_ONE_AHEAD = re.compile(r"\b0 workloads[^.;]*ahead")


class VisibleText(HTMLParser):
    """The text a person reads: element text outside <script>/<style>; attributes (tooltips) are not text."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = VisibleText()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def raw_internals(text: str) -> list[str]:
    """What a researcher should never read: each finding with a little context."""
    found = []
    for pattern in (UNIX_TIMESTAMP, REASON_CODE, NO_ONE_AHEAD):
        for match in pattern.finditer(text):
            found.append(text[max(match.start() - 40, 0) : match.end() + 40])
    return found


@pytest.fixture
def lived_in(db) -> dict[str, object]:  # noqa: ANN001
    """The demo organisation, two weeks of history, three passes per cluster, and one workload
    whose reason carries a raw protection time and whose scheduler reserved for it 30 times."""
    now = demo_lived_in(days=14, passes=3)
    protected = Workload.objects.filter(state=WorkloadState.PENDING).order_by("id").first()
    Workload.objects.filter(pk=protected.pk).update(user_name="researcher")
    PendingReason.objects.update_or_create(
        workload=protected,
        defaults={
            "code": ReasonCode.PROTECTED_WORK,
            "message": "waiting for GPUs: the work it could replace is protected by its minimum runtime until 19:31",
            "params": {"protected_until": 1796157082.865},
            "position": 3,
            "estimated_start": None,
            "updated_at": now,
        },
    )
    for minute in range(30):
        Decision.objects.create(
            cluster=protected.cluster,
            workload=protected,
            kind=DecisionKind.RESERVE,
            created_at=now - timedelta(seconds=4 * minute),
        )
    return {"protected": protected}


def pages(protected: Workload) -> list[str]:
    org = BudgetNode.objects.get(path="lumen-lab")
    pending = list(
        Workload.objects.filter(state=WorkloadState.PENDING).order_by("pending_reason__code", "id")
    )
    one_per_reason = {w.pending_reason.code: w for w in pending if hasattr(w, "pending_reason")}
    running = Workload.objects.filter(state=WorkloadState.RUNNING).order_by("id").first()
    urls = [
        "/",
        "/budgets/main/",
        f"/budgets/delivery/main/{org.pk}/",
        "/scheduling/queue/main/",
        "/scheduling/queue/main/?page=2",
        "/scheduling/queue/h100/",
        "/metrics/main/",
        "/metrics/main/waits/",
        "/glossary/",
        "/budgets/whatif/main/",
        f"/scheduling/workloads/{protected.pk}/",
    ]
    urls += [
        f"/scheduling/queue/{w.cluster.slug}/?reason={code}" for code, w in sorted(one_per_reason.items())
    ]
    urls += [f"/scheduling/workloads/{w.pk}/" for w in one_per_reason.values()]
    if running:
        urls.append(f"/scheduling/workloads/{running.pk}/")
    return urls


def test_no_page_shows_a_raw_timestamp_a_reason_code_or_zero_workloads_ahead(lived_in):
    protected = lived_in["protected"]
    findings = {}
    for persona in PERSONAS:
        client = Client()
        client.force_login(User.objects.get(username=persona))
        for url in pages(protected):
            response = client.get(url)
            if response.status_code == 404:  # a researcher's view of someone else's workload
                continue
            assert response.status_code == 200, (persona, url, response.status_code)
            if problems := raw_internals(visible_text(response.content.decode())):
                findings[f"{persona} {url}"] = problems
    assert findings == {}


def test_a_protected_reason_and_repeated_reservations_read_as_sentences(lived_in):
    protected = lived_in["protected"]
    client = Client()
    client.force_login(User.objects.get(username="researcher"))
    html = client.get(f"/scheduling/workloads/{protected.pk}/").content.decode()
    text = visible_text(html)
    assert "Running work is still protected" in text  # the reason's plain name ...
    assert 'title="Reason code PROTECTED_WORK' in html  # ... its code in the tooltip only
    assert "protected_until" not in text and "1796157082" not in html
    assert re.search(r"Reserve ×30 between \w{3} \d+ \d\d:\d\d and \d\d:\d\d", text)
    assert "No estimate: it depends on when the protected work ends" in text


def test_the_reason_filter_offers_plain_names(lived_in):
    client = Client()
    client.force_login(User.objects.get(username="researcher"))
    html = client.get("/scheduling/queue/main/").content.decode()
    assert '<option value="WAITING_FOR_GPUS" >Waiting for GPUs to free up</option>' in html
