"""The budget API: same permissions as the pages, 400 with field errors, token auth, pinned queries."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command
from django.http import HttpRequest
from rest_framework.test import APIClient

from budgets.models import Allocation, BudgetChange, BudgetNode
from portal.tokens import token_issue

READERS = ["bob", "charlie", "nobody"]


def _api(lab, persona: str) -> APIClient:  # noqa: ANN001
    client = APIClient()
    client.force_authenticate(getattr(lab, persona))
    return client


def _gpus(lab, node: BudgetNode) -> Decimal:  # noqa: ANN001
    return Allocation.objects.get(node=node, cluster=lab.main).gpus


def test_a_token_authenticates_and_no_credentials_are_refused(lab):
    _, secret = token_issue(user=lab.bob, name="laptop")
    client = APIClient()

    assert client.get("/api/v1/budget-nodes/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/v1/budget-nodes/").status_code == 200


def test_a_user_gets_a_token_for_their_password(lab):
    response = APIClient().post("/api/v1/auth/token/", {"username": "bob", "password": "pw"})

    assert response.status_code == 201
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/v1/budget-nodes/").status_code == 200


def test_session_login_works_too(lab):
    client = APIClient()
    client.login(request=HttpRequest(), username="charlie", password="pw")  # django-axes needs a request

    assert client.get("/api/v1/clusters/").status_code == 200


@pytest.mark.parametrize("persona", ["alice", "bob", "charlie", "oscar", "ada", "nobody"])
def test_everyone_reads_nodes_tree_allocations_history_and_clusters(lab, persona):
    client = _api(lab, persona)

    for url in ["/api/v1/budget-nodes/", "/api/v1/budget-nodes/tree/?cluster=main", "/api/v1/allocations/",
                "/api/v1/budget-changes/", "/api/v1/clusters/", "/api/v1/clusters/main/"]:  # fmt: skip
        assert client.get(url).status_code == 200, url


def test_the_tree_endpoint_gives_the_arithmetic_of_the_page(lab):
    body = _api(lab, "alice").get("/api/v1/budget-nodes/tree/?cluster=main").json()
    rows = {row["path"]: row for row in body["nodes"]}

    assert (body["healthy_gpus"], body["allocated_gpus"], body["unallocated_gpus"]) == (
        "24.00",
        "20.00",
        "4.00",
    )
    assert rows["lab/vision"]["overcommitted"] is True
    assert rows["lab/vision/perception"]["entitlement"] == "6.86"
    assert rows["lab/vision/perception"]["can_edit"] is True and rows["lab/vision"]["can_edit"] is False


def test_the_tree_endpoint_needs_a_known_cluster(lab):
    client = _api(lab, "alice")

    assert client.get("/api/v1/budget-nodes/tree/").json() == {
        "cluster": ["Give a cluster slug, e.g. ?cluster=main."]
    }
    assert client.get("/api/v1/budget-nodes/tree/?cluster=nowhere").status_code == 404


def test_nodes_say_what_the_caller_may_do(lab):
    nodes = {node["path"]: node for node in _api(lab, "alice").get("/api/v1/budget-nodes/").json()["results"]}

    assert nodes["lab/vision/perception"]["can_edit"] and not nodes["lab/vision"]["can_edit"]
    assert nodes["lab/vision"]["can_add_child"] and not nodes["lab/language"]["can_add_child"]


def test_clusters_show_node_counts_and_gpus(lab):
    body = _api(lab, "bob").get("/api/v1/clusters/main/").json()

    assert body["node_count"] == 4 and body["healthy_node_count"] == 3
    assert (body["installed_gpus"], body["healthy_gpus"], body["gpu_type"]) == (32, 24, "A100")


def test_clusters_are_read_only(lab):
    assert _api(lab, "ada").post("/api/v1/clusters/", {"name": "x", "slug": "x"}).status_code == 405


@pytest.mark.parametrize("persona", READERS)
def test_a_reader_crafting_any_write_gets_403_and_nothing_changes(lab, persona):
    client = _api(lab, persona)
    node = lab.perception

    responses = [
        client.post(
            "/api/v1/allocations/", {"node": node.pk, "cluster": "main", "gpus": "99", "reason": "mine"}
        ),
        client.post("/api/v1/allocations/", {"node": node.pk, "cluster": "main", "gpus": "-1", "reason": ""}),
        client.patch(
            f"/api/v1/allocations/{Allocation.objects.get(node=node).pk}/", {"gpus": "99", "reason": "x"}
        ),
        client.post("/api/v1/budget-nodes/", {"name": "Side", "parent": node.pk}),
        client.post("/api/v1/budget-nodes/", {"name": "Rogue root", "parent": None}, format="json"),
        client.patch(f"/api/v1/budget-nodes/{node.pk}/", {"name": "Hijacked"}),
        client.patch(f"/api/v1/budget-nodes/{node.pk}/", {"parent": lab.language.pk}),
        client.post(f"/api/v1/budget-nodes/{node.pk}/archive/", {}),
    ]

    assert [response.status_code for response in responses] == [403] * 8
    assert _gpus(lab, node) == 8 and BudgetNode.objects.count() == 6
    assert BudgetNode.objects.get(pk=node.pk).path == "lab/vision/perception"
    assert not BudgetChange.objects.exists()


def test_a_manager_cannot_fund_the_node_they_manage_through_the_api(lab):
    response = _api(lab, "alice").post(
        "/api/v1/allocations/", {"node": lab.vision.pk, "cluster": "main", "gpus": "99", "reason": "more"}
    )

    assert response.status_code == 403 and _gpus(lab, lab.vision) == 12


def test_a_manager_sets_an_allocation_and_it_lands_in_the_history(lab):
    client = _api(lab, "alice")

    response = client.post(
        "/api/v1/allocations/",
        {"node": lab.perception.pk, "cluster": "main", "gpus": 9.5, "reason": "grant"},
        format="json",
    )
    history = client.get(f"/api/v1/budget-changes/?node={lab.perception.pk}").json()["results"]

    assert response.status_code == 200 and response.json()["gpus"] == "9.50"
    assert [
        (h["field"], h["old_value"], h["new_value"], h["reason"], h["actor"], h["cluster"]) for h in history
    ] == [("gpus", "8.00", "9.50", "grant", "alice", "main")]


def test_patching_an_allocation_changes_only_its_gpus(lab):
    allocation = Allocation.objects.get(node=lab.detection, cluster=lab.main)

    response = _api(lab, "alice").patch(f"/api/v1/allocations/{allocation.pk}/", {"gpus": "5", "reason": "r"})

    assert response.status_code == 200 and _gpus(lab, lab.detection) == 5


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"gpus": "-3", "reason": "cut"}, "gpus"),
        ({"gpus": "many", "reason": "more"}, "gpus"),
        ({"gpus": "5", "reason": ""}, "reason"),
        ({"gpus": "5", "reason": "x", "cluster": "nowhere"}, "cluster"),
        ({"reason": "x"}, "gpus"),
    ],
    ids=["negative", "not-a-number", "empty-reason", "unknown-cluster", "missing-gpus"],
)
def test_bad_allocation_input_is_a_400_with_field_errors_and_changes_nothing(lab, data, field):
    payload = {"node": lab.perception.pk, "cluster": "main", **data}

    response = _api(lab, "alice").post("/api/v1/allocations/", payload)

    assert response.status_code == 400 and field in response.json()
    assert _gpus(lab, lab.perception) == 8 and not BudgetChange.objects.exists()


def test_an_unknown_node_in_the_body_is_a_field_error(lab):
    response = _api(lab, "ada").post(
        "/api/v1/allocations/", {"node": 999999, "cluster": "main", "gpus": 1, "reason": "r"}
    )

    assert response.status_code == 400 and "node" in response.json()


def test_moving_under_a_descendant_is_a_400_and_changes_nothing(lab):
    response = _api(lab, "ada").patch(f"/api/v1/budget-nodes/{lab.vision.pk}/", {"parent": lab.detection.pk})

    assert response.status_code == 400
    assert response.json() == {"parent": ["A node cannot move under itself or one of its descendants."]}
    assert BudgetNode.objects.get(pk=lab.vision.pk).path == "lab/vision"


def test_a_duplicate_sibling_name_is_a_400_on_create_and_rename(lab):
    client = _api(lab, "alice")

    created = client.post("/api/v1/budget-nodes/", {"name": "Generation", "parent": lab.vision.pk})
    renamed = client.patch(f"/api/v1/budget-nodes/{lab.perception.pk}/", {"name": "generation"})

    assert (created.status_code, renamed.status_code) == (400, 400)
    assert "already exists" in created.json()["name"][0] and "already exists" in renamed.json()["name"][0]
    assert BudgetNode.objects.count() == 6 and not BudgetChange.objects.exists()


def test_a_manager_creates_moves_renames_and_archives_below_their_node(lab):
    client = _api(lab, "alice")

    created = client.post("/api/v1/budget-nodes/", {"name": "Video", "parent": lab.vision.pk}).json()
    moved = client.patch(f"/api/v1/budget-nodes/{created['id']}/", {"parent": lab.perception.pk}).json()
    renamed = client.patch(f"/api/v1/budget-nodes/{created['id']}/", {"name": "Video Understanding"}).json()
    archived = client.post(f"/api/v1/budget-nodes/{created['id']}/archive/", {"reason": "merged"}).json()

    assert created["path"] == "lab/vision/video" and moved["path"] == "lab/vision/perception/video"
    assert renamed["path"] == "lab/vision/perception/video-understanding" and archived == {"archived": 1}
    fields = BudgetChange.objects.filter(node_id=created["id"]).order_by("id").values_list("field", flat=True)
    assert list(fields) == ["created", "parent", "name", "archived"]


def test_only_staff_create_roots(lab):
    assert (
        _api(lab, "oscar")
        .post("/api/v1/budget-nodes/", {"name": "Lab 2", "parent": None}, format="json")
        .status_code
        == 201
    )
    assert (
        _api(lab, "alice").post("/api/v1/budget-nodes/", {"name": "Lab 3"}, format="json").status_code == 403
    )


@pytest.mark.parametrize(
    ("url", "queries"),
    [
        ("/api/v1/budget-nodes/", 3),  # count, page, the caller's memberships
        ("/api/v1/allocations/", 2),
        ("/api/v1/budget-changes/", 2),
        ("/api/v1/clusters/", 2),
        ("/api/v1/budget-nodes/tree/?cluster=main", 5),  # cluster + the tree's four
    ],
)
def test_list_endpoints_take_a_fixed_number_of_queries(lab, url, queries, django_assert_num_queries):
    client = _api(lab, "alice")
    for index in range(15):
        client.post("/api/v1/budget-nodes/", {"name": f"p{index}", "parent": lab.vision.pk})
        client.post(
            "/api/v1/allocations/",
            {"node": lab.detection.pk, "cluster": "main", "gpus": index, "reason": "r"},
        )

    with django_assert_num_queries(queries):
        assert client.get(url).status_code == 200


def test_the_openapi_schema_generates_without_warnings(lab, tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))

    schema = (tmp_path / "schema.yaml").read_text()
    assert "/api/v1/budget-nodes/tree/" in schema and "/api/v1/allocations/" in schema
    assert _api(lab, "bob").get("/api/schema/").status_code == 200


def test_a_rename_with_a_refused_move_changes_neither(lab):
    response = _api(lab, "ada").patch(
        f"/api/v1/budget-nodes/{lab.vision.pk}/", {"name": "Sight", "parent": lab.detection.pk}
    )

    assert response.status_code == 400
    assert BudgetNode.objects.get(pk=lab.vision.pk).name == "Vision" and not BudgetChange.objects.exists()
