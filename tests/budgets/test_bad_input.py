"""What an attacker or a careless client sent, and what it must get: a 400 naming the problem, never
a 500, and nothing stored wrong. Each case is one the hardening review found answering 500 or
accepting nonsense."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from budgets.models import Allocation, BudgetChange, BudgetNode
from scheduling.models import Workload


def _api(user) -> APIClient:  # noqa: ANN001
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user)
    return client


def _raw(client: APIClient, method: str, url: str, body: str):  # noqa: ANN202
    return getattr(client, method)(url, data=body, content_type="application/json")


@pytest.mark.parametrize("body", ["[null, null]", "true", '"s"', "12", "null"])
@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/v1/allocations/"),
        ("post", "/api/v1/budget-nodes/"),
        ("post", "/api/v1/whatif/main/"),
        ("patch", "/api/v1/budget-nodes/{node}/"),
        ("post", "/api/v1/workloads/"),
    ],  # fmt: skip
)
def test_a_json_body_that_is_not_an_object_is_a_400(lab, method, url, body):
    response = _raw(_api(lab.oscar), method, url.format(node=lab.perception.pk), body)

    assert response.status_code == 400 and "JSON object" in response.json()["detail"]


@pytest.mark.parametrize(
    "query",
    ["offset=99999999999999999999999", "offset=-1", "limit=x", "limit=0"],
)
def test_pagination_out_of_range_is_a_400_naming_the_parameter(lab, query):
    response = _api(lab.bob).get(f"/api/v1/budget-changes/?{query}")

    assert response.status_code == 400 and set(response.json()) == {query.split("=")[0]}


def test_a_limit_beyond_64_bits_is_capped_not_an_error(lab):
    response = _api(lab.bob).get("/api/v1/budget-nodes/?limit=99999999999999999999999")

    assert response.status_code == 200 and len(response.json()["results"]) == BudgetNode.objects.count()


@pytest.mark.parametrize("gpus", ["NaN", "Infinity", "-Infinity", "-1", "1e400"])
def test_whatif_budgets_must_be_finite_non_negative_numbers(lab, gpus):
    body = json.dumps({"days": 7, "budgets": {"lab/vision": gpus}})

    response = _raw(_api(lab.oscar), "post", "/api/v1/whatif/main/", body)

    assert response.status_code == 400 and "budgets" in response.json()


def test_whatif_given_a_bare_nan_token_is_a_400(lab):
    response = _raw(_api(lab.oscar), "post", "/api/v1/whatif/main/", '{"budgets": {"lab/vision": NaN}}')

    assert response.status_code == 400


@pytest.mark.parametrize("field", ["min_runtime_s", "max_runtime_s", "gpus", "gpus_per_node"])
def test_workload_integers_beyond_the_columns_are_a_400_on_that_field(lab, field):
    body = {"cluster": "main", "allocation": "lab/vision/perception", "gpus": 1, field: 2**31}

    response = _api(lab.bob).post("/api/v1/workloads/", body, format="json")

    assert response.status_code == 400 and field in response.json()


@pytest.mark.parametrize(
    "metadata",
    [{"note": "a\u0000b"}, {"a\u0000": 1}, {"deep": [{"x": "\u0000"}]}],
    ids=["value", "key", "nested"],
)
def test_a_nul_character_in_a_json_body_is_a_400(lab, metadata):
    body = {"cluster": "main", "allocation": "lab/vision/perception", "gpus": 1, "metadata": metadata}

    response = _api(lab.bob).post("/api/v1/workloads/", body, format="json")

    assert response.status_code == 400 and "NUL" in json.dumps(response.json())
    assert not Workload.objects.exists()


def test_metadata_with_a_nul_sent_as_a_form_is_a_400_on_the_field(lab):
    from scheduling.api.serializers import WorkloadSubmitSerializer

    body = {"cluster": "main", "allocation": "lab/x", "gpus": 1, "metadata": {"n": "a\u0000"}}
    submission = WorkloadSubmitSerializer(data=body)

    assert not submission.is_valid() and "metadata" in submission.errors


@pytest.mark.parametrize("url", ["/api/v1/budget-nodes/?parent=%00", "/api/v1/workloads/?cluster=a%00b",
                                 "/api/v1/queue/main/?allocation=%00", "/scheduling/main/queue/?user=%00"])  # fmt: skip
def test_a_nul_character_in_the_query_string_is_a_400(lab, url):
    client = _api(lab.bob)
    client.force_login(lab.bob)

    assert client.get(url).status_code == 400


def test_minus_zero_gpus_is_stored_as_zero_and_the_history_chain_holds(lab):
    client = _api(lab.alice)
    url = f"/api/v1/allocations/{Allocation.objects.get(node=lab.perception, cluster=lab.main).pk}/"

    client.patch(url, {"gpus": "-0", "reason": "pause"}, format="json")
    client.patch(url, {"gpus": "3", "reason": "resume"}, format="json")

    changes = list(BudgetChange.objects.filter(node=lab.perception, field="gpus").order_by("id"))
    assert [(c.old_value, c.new_value) for c in changes] == [("8.00", "0.00"), ("0.00", "3.00")]


@pytest.mark.parametrize("gpus", ["１２", "٣", "1e1", "0x10", "12,5", " "])
def test_gpus_accept_plain_ascii_decimals_only(lab, gpus):
    url = f"/api/v1/allocations/{Allocation.objects.get(node=lab.perception, cluster=lab.main).pk}/"

    response = _api(lab.alice).patch(url, {"gpus": gpus, "reason": "r"}, format="json")

    assert response.status_code == 400 and "gpus" in response.json()
    assert Allocation.objects.get(node=lab.perception, cluster=lab.main).gpus == 8


def test_a_name_without_latin_letters_or_digits_gets_a_message_that_says_so(lab):
    response = _api(lab.alice).post(
        "/api/v1/budget-nodes/", {"parent": lab.vision.pk, "name": "Обучение"}, format="json"
    )

    assert response.status_code == 400 and "Latin letter" in response.json()["name"][0]


def test_a_name_mixing_scripts_keeps_its_latin_part_as_the_slug(lab):
    response = _api(lab.alice).post(
        "/api/v1/budget-nodes/", {"parent": lab.vision.pk, "name": "Обучение 2"}, format="json"
    )

    assert response.status_code == 201 and response.json()["path"] == "lab/vision/2"


@pytest.mark.parametrize("gpu_type", ["H100", "B200"])
def test_an_unknown_gpu_type_is_refused_with_the_cluster_s_types(lab, gpu_type):
    body = {"cluster": "main", "allocation": "lab/vision/perception", "gpus": 1, "gpu_type": gpu_type}

    response = _api(lab.bob).post("/api/v1/workloads/", body, format="json")

    assert response.status_code == 400
    assert response.json()["gpu_type"] == [f"main has no {gpu_type} GPUs; its nodes have: A100."]


def test_a_known_gpu_type_is_stored_as_the_cluster_spells_it(lab):
    body = {"cluster": "main", "allocation": "lab/vision/perception", "gpus": 1, "gpu_type": "a100"}

    response = _api(lab.bob).post("/api/v1/workloads/", body, format="json")

    assert response.status_code == 201 and Workload.objects.get().gpu_type == "A100"


@pytest.mark.parametrize(
    ("persona", "sees"),
    [("bob", True), ("alice", True), ("oscar", True), ("charlie", False), ("nobody", False)],
    ids=["owner", "manager-of-the-allocation", "staff", "viewer", "unrelated"],
)
def test_the_command_is_shown_to_the_owner_managers_and_staff_only(lab, persona, sees):
    body = {"cluster": "main", "allocation": "lab/vision/perception", "gpus": 1,
            "command": "train --token=hunter2", "image": "pytorch:24"}  # fmt: skip
    created = _api(lab.bob).post("/api/v1/workloads/", body, format="json").json()
    client = _api(getattr(lab, persona))

    detail = client.get(f"/api/v1/workloads/{created['id']}/").json()["metadata"]
    listed = client.get("/api/v1/workloads/").json()["results"][0]["metadata"]

    assert ("command" in detail, "command" in listed) == (sees, sees)
    assert detail["image"] == listed["image"] == "pytorch:24"


def test_budget_history_documents_actor_and_cluster_as_nullable(lab):
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    change = schema["components"]["schemas"]["BudgetChange"]["properties"]

    assert change["actor"].get("nullable") is True and change["cluster"].get("nullable") is True


def test_the_portal_endpoints_document_their_fields(lab):
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    queue = schema["paths"]["/api/v1/queue/{cluster_slug}/"]["get"]["responses"]["200"]

    reference = queue["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert {"results", "workloads", "gpus"} <= set(schema["components"]["schemas"][reference]["properties"])
