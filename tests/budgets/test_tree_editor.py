"""The tree editor pages: who sees edit controls, who may post, htmx fragments, field errors."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client

from budgets import services
from budgets.models import Allocation, BudgetChange, BudgetNode

HTMX = {"HTTP_HX_REQUEST": "true"}
EDITORS = ["alice", "oscar", "ada"]
READERS = ["bob", "charlie", "nobody"]


def _client(lab, persona: str) -> Client:  # noqa: ANN001
    client = Client()
    client.force_login(getattr(lab, persona))
    return client


def _gpus(lab, node: BudgetNode) -> Decimal:  # noqa: ANN001
    return Allocation.objects.get(node=node, cluster=lab.main).gpus


def test_anonymous_visitors_are_sent_to_log_in(lab):
    response = Client().get("/budgets/main/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_index_opens_the_first_cluster(lab):
    assert _client(lab, "bob").get("/budgets/")["Location"] == "/budgets/main/"


@pytest.mark.parametrize("persona", EDITORS + READERS)
def test_everyone_signed_in_reads_the_whole_tree(lab, persona):
    response = _client(lab, persona).get("/budgets/main/")

    assert response.status_code == 200
    for node in ("Lab", "Vision", "Perception", "Detection", "Language"):
        assert f">{node}</a>" in response.content.decode()


@pytest.mark.parametrize("persona", EDITORS)
def test_editors_see_the_edit_controls_of_a_node_they_may_edit(lab, persona):
    page = _client(lab, persona).get(f"/budgets/main/?node={lab.perception.pk}").content.decode()

    assert "Change allocation" in page and "Rename" in page and "Archive" in page
    assert "readonly-note" not in page


@pytest.mark.parametrize("persona", READERS)
def test_readers_see_no_edit_controls(lab, persona):
    page = _client(lab, persona).get(f"/budgets/main/?node={lab.perception.pk}").content.decode()

    assert "Change allocation" not in page and '<form class="panel-form' not in page
    assert "readonly-note" in page


def test_a_manager_may_add_children_to_the_node_they_manage_but_not_edit_it(lab):
    page = _client(lab, "alice").get(f"/budgets/main/?node={lab.vision.pk}").content.decode()

    assert "Add a child" in page and "You manage Vision" in page
    assert "Change allocation" not in page and "Rename" not in page


@pytest.mark.parametrize("persona", READERS)
def test_a_crafted_post_from_a_reader_is_refused_and_changes_nothing(lab, persona):
    client = _client(lab, persona)
    node = lab.perception

    responses = [
        client.post(f"/budgets/main/nodes/{node.pk}/allocation/", {"gpus": "99", "reason": "mine"}, **HTMX),
        client.post(f"/budgets/main/nodes/{node.pk}/allocation/", {"gpus": "-1", "reason": ""}),
        client.post(f"/budgets/main/nodes/{node.pk}/rename/", {"name": "Hijacked"}, **HTMX),
        client.post(f"/budgets/main/nodes/{node.pk}/move/", {"parent": lab.language.pk}, **HTMX),
        client.post(f"/budgets/main/nodes/{node.pk}/children/", {"name": "Side project"}, **HTMX),
        client.post(f"/budgets/main/nodes/{node.pk}/archive/", {"reason": ""}, **HTMX),
    ]

    assert [response.status_code for response in responses] == [403] * 6
    assert _gpus(lab, node) == 8
    assert BudgetNode.objects.get(pk=node.pk).path == "lab/vision/perception"
    assert not BudgetChange.objects.exists() and BudgetNode.objects.count() == 6


def test_a_manager_cannot_edit_the_node_they_manage_nor_outside_it(lab):
    client = _client(lab, "alice")

    own = client.post(
        f"/budgets/main/nodes/{lab.vision.pk}/allocation/", {"gpus": "99", "reason": "x"}, **HTMX
    )
    other = client.post(
        f"/budgets/main/nodes/{lab.language.pk}/allocation/", {"gpus": "1", "reason": "x"}, **HTMX
    )
    elsewhere = client.post(
        f"/budgets/main/nodes/{lab.perception.pk}/move/", {"parent": lab.language.pk}, **HTMX
    )

    assert (own.status_code, other.status_code, elsewhere.status_code) == (403, 403, 403)
    assert not BudgetChange.objects.exists()


def test_an_htmx_allocation_change_returns_the_panel_with_history_and_the_tree_out_of_band(lab):
    response = _client(lab, "alice").post(
        f"/budgets/main/nodes/{lab.perception.pk}/allocation/", {"gpus": "10", "reason": "bigger run"}, **HTMX
    )
    body = response.content.decode()

    assert response.status_code == 200 and "<html" not in body
    assert body.index('class="panel-inner"') < body.index(
        'id="budget-tree" class="tree card" hx-swap-oob="true"'
    )
    assert "bigger run" in body and "Allocation on main" in body
    assert _gpus(lab, lab.perception) == 10


def test_without_htmx_a_change_redirects_back_to_the_selected_node(lab):
    response = _client(lab, "alice").post(
        f"/budgets/main/nodes/{lab.perception.pk}/allocation/", {"gpus": "10", "reason": "bigger run"}
    )

    assert response.status_code == 302
    assert response["Location"] == f"/budgets/main/?node={lab.perception.pk}"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gpus": "-4", "reason": "cut"}, "GPUs cannot be negative."),
        ({"gpus": "lots", "reason": "more"}, "Enter a number of GPUs"),
        ({"gpus": "12", "reason": "  "}, "Say briefly why the budget changes."),
    ],
    ids=["negative", "not-a-number", "empty-reason"],
)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_bad_allocation_input_shows_a_field_error_and_changes_nothing(lab, data, message, htmx):
    response = _client(lab, "alice").post(
        f"/budgets/main/nodes/{lab.perception.pk}/allocation/", data, **(HTMX if htmx else {})
    )
    body = response.content.decode()

    assert response.status_code == 200
    assert 'class="errorlist" id="id_' in body and message in body
    assert len(re.findall(r'\bid="([^"]+)"', body)) == len(set(re.findall(r'\bid="([^"]+)"', body)))
    assert ("<html" in body) is not htmx
    assert "hx-swap-oob" not in body
    assert _gpus(lab, lab.perception) == 8 and not BudgetChange.objects.exists()


def test_moving_under_a_descendant_shows_a_field_error(lab):
    response = _client(lab, "ada").post(
        f"/budgets/main/nodes/{lab.perception.pk}/move/", {"parent": lab.detection.pk}, **HTMX
    )

    assert "cannot move under itself or one of its descendants" in response.content.decode()
    assert 'id="move_parent-errors"' in response.content.decode()
    assert BudgetNode.objects.get(pk=lab.perception.pk).parent == lab.vision


def test_a_duplicate_sibling_name_shows_a_field_error_on_add_and_rename(lab):
    client = _client(lab, "alice")

    added = client.post(f"/budgets/main/nodes/{lab.vision.pk}/children/", {"name": "generation"}, **HTMX)
    renamed = client.post(f"/budgets/main/nodes/{lab.perception.pk}/rename/", {"name": "Generation"}, **HTMX)

    for response, form in ((added, "child"), (renamed, "rename")):
        assert f'id="{form}_name-errors"' in response.content.decode()
        assert "already exists under Vision" in response.content.decode()
    assert BudgetNode.objects.count() == 6 and not BudgetChange.objects.exists()


def test_adding_a_child_opens_the_new_node_with_its_creation_in_the_history(lab):
    response = _client(lab, "alice").post(
        f"/budgets/main/nodes/{lab.vision.pk}/children/", {"name": "Video"}, **HTMX
    )
    body = response.content.decode()

    child = BudgetNode.objects.get(path="lab/vision/video")
    assert f'data-node-id="{child.pk}"' in body and "Created as" in body


def test_a_manager_moves_renames_and_archives_below_their_node(lab):
    client = _client(lab, "alice")

    client.post(f"/budgets/main/nodes/{lab.detection.pk}/move/", {"parent": lab.generation.pk}, **HTMX)
    client.post(f"/budgets/main/nodes/{lab.detection.pk}/rename/", {"name": "Detectors"}, **HTMX)
    archived = client.post(f"/budgets/main/nodes/{lab.detection.pk}/archive/", {"reason": "done"}, **HTMX)

    node = BudgetNode.objects.get(pk=lab.detection.pk)
    assert (node.path, node.archived) == ("lab/vision/generation/detectors", True)
    assert "Archived" in archived.content.decode()
    assert list(BudgetChange.objects.filter(node=node).order_by("id").values_list("field", flat=True)) == [
        "parent", "name", "archived", "gpus",  # archiving also drops its allocation to 0
    ]  # fmt: skip


def test_the_panel_fragment_is_only_served_to_htmx(lab):
    client = _client(lab, "bob")

    fragment = client.get(f"/budgets/main/nodes/{lab.perception.pk}/", **HTMX)
    plain = client.get(f"/budgets/main/nodes/{lab.perception.pk}/")

    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert plain["Location"] == f"/budgets/main/?node={lab.perception.pk}"


def test_the_tree_page_takes_a_fixed_number_of_queries(lab, django_assert_max_num_queries):
    client = _client(lab, "alice")
    client.get("/budgets/main/")  # warm the session

    with django_assert_max_num_queries(8):
        client.get("/budgets/main/")
    for index in range(20):
        services.node_create(actor=lab.ada, parent=lab.generation, name=f"project {index}")
    with django_assert_max_num_queries(8):
        assert client.get("/budgets/main/").status_code == 200


def test_the_page_with_a_node_open_takes_a_fixed_number_of_queries(lab, django_assert_num_queries):
    client = _client(lab, "alice")
    url = f"/budgets/main/?node={lab.perception.pk}"
    client.get(url)

    with django_assert_num_queries(10):
        client.get(url)
    for _ in range(5):
        services.allocation_set(actor=lab.ada, node=lab.perception, cluster=lab.main, gpus=_ + 1, reason="r")
    with django_assert_num_queries(10):
        client.get(url)


def test_an_unknown_cluster_or_node_is_a_404(lab):
    client = _client(lab, "ada")

    assert client.get("/budgets/nowhere/").status_code == 404
    assert client.get("/budgets/main/?node=999999").status_code == 404


@pytest.mark.parametrize("persona", EDITORS + READERS)
def test_the_home_page_works_for_every_persona(lab, persona):
    assert _client(lab, persona).get("/").status_code == 200
