"""Cancel, hold, release and "resubmit like this" on the pages, and the CSV downloads, per persona.

bob owns the first pending workloads of the history queue; alice manages vision (above bob's
allocation); oscar is staff; nobody has no membership and must neither see the buttons nor act.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from scheduling.models import Workload, WorkloadState
from scheduling.services import SubmissionRefused, workload_resubmit
from tests.pages.conftest import client_for

HTMX = {"HTTP_HX_REQUEST": "true"}


def bobs(history) -> Workload:  # noqa: ANN001
    """bob's first pending workload in his own allocation (alice manages it from vision)."""
    return history.bob_pending.filter(allocation__path="lab/vision/perception").first()


def url(workload: Workload, verb: str) -> str:
    return f"/scheduling/workloads/{workload.pk}/{verb}/"


def refreshed(workload: Workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


@pytest.mark.parametrize("persona", ["bob", "alice", "oscar"])
def test_the_owner_the_allocations_manager_and_staff_see_the_buttons(history, frozen_now, persona):
    page = (
        client_for(getattr(history, persona))
        .get(f"/scheduling/workloads/{bobs(history).pk}/")
        .content.decode()
    )
    assert 'data-action="cancel"' in page and 'data-action="hold"' in page
    assert 'name="csrfmiddlewaretoken"' in page


def test_anyone_else_sees_no_buttons_and_gets_403_for_each_action(history, frozen_now):
    workload = bobs(history)
    client = client_for(history.nobody)
    assert "data-action=" not in client.get(f"/scheduling/workloads/{workload.pk}/").content.decode()
    assert "data-action=" not in client.get("/scheduling/queue/main/").content.decode()
    for verb in ("cancel", "hold", "release", "resubmit"):
        assert client.post(url(workload, verb), {"changes": '{"gpus": 1}'}, **HTMX).status_code == 403
    assert refreshed(workload).state == WorkloadState.PENDING and not refreshed(workload).held
    assert (
        Workload.objects.count() == Workload.objects.filter(metadata__resubmitted_from__isnull=True).count()
    )


def test_in_the_queue_bob_gets_buttons_on_his_own_rows_only(history, frozen_now):
    page = client_for(history.bob).get("/scheduling/queue/main/").content.decode()
    mine = set(history.bob_pending.values_list("pk", flat=True))
    with_buttons = {int(pk) for pk in _attribute_values(page, "data-actions")}
    assert with_buttons == mine and mine


def _attribute_values(html: str, name: str) -> list[str]:
    return [chunk.split('"', 1)[0] for chunk in html.split(f'{name}="')[1:]]


def test_hold_by_htmx_answers_with_the_status_showing_release_and_tells_the_queue(history, frozen_now):
    workload = bobs(history)
    response = client_for(history.bob).post(url(workload, "hold"), {"note": "data not ready"}, **HTMX)
    assert response.status_code == 200 and response["HX-Trigger"] == "workload-changed"
    fragment = response.content.decode()
    assert "Held: it will not start until released." in fragment
    assert 'data-action="release"' in fragment and 'data-action="hold"' not in fragment
    assert refreshed(workload).held and refreshed(workload).held_note == "data not ready"
    released = client_for(history.alice).post(url(workload, "release"), **HTMX)  # the manager
    assert "Released." in released.content.decode() and not refreshed(workload).held


def test_cancelling_twice_shows_the_refusal_in_the_status(history, frozen_now):
    workload = bobs(history)
    client = client_for(history.oscar)
    assert "Cancelled." in client.post(url(workload, "cancel"), **HTMX).content.decode()
    again = client.post(url(workload, "cancel"), **HTMX).content.decode()
    assert f"Workload {workload.pk} is already cancelled." in again
    assert 'data-action="cancel"' not in again


def test_without_javascript_a_cancel_comes_back_to_the_queue_with_its_filters(history, frozen_now):
    workload = bobs(history)
    client = client_for(history.bob)
    response = client.post(url(workload, "cancel"), {"next": "/scheduling/queue/main/?user=bob"})
    assert response.status_code == 302 and response["Location"] == "/scheduling/queue/main/?user=bob"
    assert refreshed(workload).state == WorkloadState.CANCELLED
    page = client.get(response["Location"]).content.decode()
    assert f"Workload {workload.pk}: Cancelled." in page
    other = history.bob_pending.exclude(pk=workload.pk).first()
    elsewhere = client.post(url(other, "hold"), {"next": "https://evil.example/"})
    assert elsewhere["Location"] == f"/scheduling/workloads/{other.pk}/"


def test_a_post_without_the_csrf_token_is_refused(history, frozen_now):
    client = Client(enforce_csrf_checks=True)
    client.force_login(history.bob)
    assert client.post(url(bobs(history), "cancel"), **HTMX).status_code == 403
    assert refreshed(bobs(history)).state == WorkloadState.PENDING


def test_resubmit_like_this_asks_first_then_submits_the_change_and_cancels_the_old(history, frozen_now):
    old = bobs(history)
    client = client_for(history.bob)
    form = {"changes": json.dumps({"gpus": 1, "gpus_per_node": None}), "label": "with 1 GPU"}
    confirm = client.post(url(old, "resubmit"), form)
    assert confirm.status_code == 200 and 'name="confirmed" value="yes"' in confirm.content.decode()
    assert refreshed(old).state == WorkloadState.PENDING  # nothing yet
    response = client.post(url(old, "resubmit"), form, **HTMX)
    new = Workload.objects.get(metadata__resubmitted_from=old.pk)
    assert response.status_code == 204 and response["HX-Redirect"] == f"/scheduling/workloads/{new.pk}/"
    assert refreshed(old).state == WorkloadState.CANCELLED
    assert (new.gpus, new.owner, new.allocation, new.workload_class) == (
        1,
        history.bob,
        old.allocation,
        old.workload_class,
    )
    assert (new.resumable, new.min_runtime_requested_s, new.name) == (
        old.resumable,
        old.min_runtime_requested_s,
        old.name,
    )
    assert (
        f"Workload {new.pk} submitted with 1 GPU; workload {old.pk} cancelled."
        in client.get(response["HX-Redirect"]).content.decode()
    )


def test_a_refused_resubmission_cancels_nothing_and_says_why(history, frozen_now):
    old = bobs(history)
    response = client_for(history.bob).post(url(old, "resubmit"), {"changes": '{"gpus": 12}'}, **HTMX)
    assert "must be a whole number of nodes" in response.content.decode()
    assert refreshed(old).state == WorkloadState.PENDING
    with pytest.raises(SubmissionRefused):
        workload_resubmit(workload=old, actor=history.bob, changes={"priority": "high"})


def test_a_malformed_change_is_refused_with_a_message_not_a_server_error(history, frozen_now):
    old = bobs(history)
    client = client_for(history.bob)
    for changes in ('{"gpus_per_node": "2"}', '{"gpus": [1]}'):
        response = client.post(url(old, "resubmit"), {"changes": changes}, **HTMX)
        assert response.status_code == 200 and "A whole number" in response.content.decode()
    assert refreshed(old).state == WorkloadState.PENDING


def test_a_manager_resubmitting_unfunded_keeps_the_researcher_as_owner(history, frozen_now):
    old = bobs(history)
    new = workload_resubmit(
        workload=old, actor=history.alice, changes={"allocation": "(unfunded)", "min_runtime_s": 0.0}
    ).workload
    assert (new.owner, new.allocation, new.min_runtime_s) == (history.bob, None, 0)
    assert refreshed(old).state == WorkloadState.CANCELLED


def _csv(response) -> list[dict]:  # noqa: ANN001
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment; filename=")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_queue_csv_has_the_pages_rows_in_order_with_its_filters(history, frozen_now):
    client = client_for(history.alice)
    rows = _csv(client.get("/scheduling/queue/main/", {"user": "bob", "format": "csv"}))
    api = client.get("/api/v1/queue/main/", {"user": "bob"}).json()["results"]
    assert (
        [int(r["id"]) for r in rows]
        == [r["id"] for r in api]
        == list(history.bob_pending.values_list("pk", flat=True))
    )
    assert {r["user"] for r in rows} == {"bob"} and rows[0]["reason"] == api[0]["reason"]
    everyone = _csv(client.get("/scheduling/queue/main/", {"format": "csv"}))
    assert len(everyone) == Workload.objects.filter(state="pending").count() > len(rows)
    page = client.get("/scheduling/queue/main/", {"user": "bob"}).content.decode()
    assert "?user=bob&amp;format=csv" in page


def test_the_delivery_csv_has_the_node_then_its_children_for_the_period(history, frozen_now):
    client = client_for(history.alice)
    rows = _csv(client.get(f"/budgets/delivery/main/{history.vision.pk}/", {"days": 30, "format": "csv"}))
    api = client.get(f"/api/v1/delivery/main/{history.vision.pk}/", {"days": 30}).json()
    assert [(r["level"], r["path"]) for r in rows] == [("node", "lab/vision"), ("child", "lab/vision/generation"), ("child", "lab/vision/perception")] or \
        [r["path"] for r in rows[1:]] == [c["path"] for c in api["children"]]  # fmt: skip
    assert float(rows[0]["delivered_gpu_hours"]) == pytest.approx(api["delivered_gpu_hours"])
    assert [float(r["owed_gpu_hours"]) for r in rows[1:]] == pytest.approx(
        [c["owed_gpu_hours"] for c in api["children"]]
    )


def test_the_waits_csv_has_one_row_per_class_as_the_page(history, frozen_now):
    client = client_for(history.oscar)
    rows = _csv(client.get("/metrics/main/waits/", {"days": 7, "format": "csv"}))
    api = client.get("/api/v1/waits/main/", {"days": 7}).json()["classes"]
    assert [(r["workload_class"], int(r["starts"])) for r in rows] == [
        (c["workload_class"], c["starts"]) for c in api
    ]
    assert rows and all(r["p50_s"] for r in rows)


def test_the_node_panel_links_to_the_nodes_delivery_page_and_the_tree_can_be_searched(history, frozen_now):
    client = client_for(history.bob)
    panel = client.get(f"/budgets/main/nodes/{history.perception.pk}/", **HTMX).content.decode()
    assert f'href="/budgets/delivery/main/{history.perception.pk}/"' in panel
    tree = client.get("/budgets/main/").content.decode()
    assert 'id="tree-search"' in tree and "budgets/tree.js" in tree
    assert 'data-path="lab/vision/perception"' in tree
