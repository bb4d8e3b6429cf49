"""The workloads API, per persona, with bad input refused field by field and nothing written."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduling.models import Decision, PendingReason, Workload, WorkloadState
from scheduling.policy import ReasonCode

URL = "/api/v1/workloads/"


def client_for(user) -> APIClient:  # noqa: ANN001
    client = APIClient()
    client.force_authenticate(user)
    return client


def submission(**overrides: object) -> dict:
    return {"cluster": "main", "allocation": "lab/vision/perception", "gpus": 4, "name": "train",
            "command": "python train.py", "image": "pytorch:24.01", **overrides}  # fmt: skip


def test_a_member_submits_to_their_allocation_and_sees_it_pending(lab):
    response = client_for(lab.bob).post(
        URL, submission(workload_class="debug", resumable=True), format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "pending"
    assert body["allocation"] == "lab/vision/perception"
    assert body["user"] == "bob"
    assert body["metadata"]["command"] == "python train.py"
    assert body["warnings"] == []
    assert Workload.objects.get().owner == lab.bob


def test_a_manager_may_submit_anywhere_under_the_node_they_manage(lab):
    response = client_for(lab.alice).post(URL, submission(allocation="lab/vision"), format="json")
    assert response.status_code == 201


def test_staff_may_submit_to_any_allocation(lab):
    response = client_for(lab.oscar).post(URL, submission(allocation="lab/language"), format="json")
    assert response.status_code == 201


def test_anonymous_requests_are_refused(lab):
    assert APIClient().post(URL, submission(), format="json").status_code in (401, 403)
    assert APIClient().get(URL).status_code in (401, 403)


@pytest.mark.parametrize(
    ("persona", "overrides", "field", "words"),
    [
        pytest.param(
            "bob", {"allocation": "lab/nowhere"}, "allocation", "no allocation named", id="unknown-allocation"
        ),
        pytest.param("bob", {"gpus": 0}, "gpus", "at least 1", id="zero-gpus"),
        pytest.param("bob", {"gpus": -4}, "gpus", "at least 1", id="negative-gpus"),
        pytest.param("bob", {"gpus": 12}, "gpus", "multiple of 8", id="not-whole-nodes"),
        pytest.param("bob", {"gpus": 64}, "gpus", "can never fit", id="more-than-the-cluster"),
        pytest.param("bob", {"allocation": "lab/language"}, "allocation", "not a member", id="non-member"),
        pytest.param(
            "charlie", {"allocation": "lab"}, "allocation", "not a member", id="viewer-cannot-submit"
        ),
        pytest.param("bob", {"cluster": "nowhere"}, "cluster", "no cluster", id="unknown-cluster"),
        pytest.param("bob", {"gpus": "eight"}, "gpus", "valid integer", id="gpus-not-a-number"),
        pytest.param(
            "bob", {"workload_class": "urgent"}, "workload_class", "not a valid choice", id="bad-class"
        ),
        pytest.param("bob", {"min_runtime_s": -1}, "min_runtime_s", "negative", id="negative-min-runtime"),
    ],
)
def test_bad_submissions_get_a_field_error_and_write_nothing(lab, persona, overrides, field, words):
    response = client_for(getattr(lab, persona)).post(URL, submission(**overrides), format="json")
    assert response.status_code == 400
    errors = response.json()
    assert words in " ".join(errors[field]).lower(), errors
    assert not Workload.objects.exists()


def test_a_minimum_runtime_above_the_cap_is_clipped_with_a_warning(lab):
    response = client_for(lab.bob).post(URL, submission(min_runtime_s=12 * 3600), format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["min_runtime_s"] == 8 * 3600
    assert body["min_runtime_requested_s"] == 12 * 3600
    assert "cap" in body["warnings"][0]


def test_whole_node_multiples_are_accepted_above_one_node(lab):
    response = client_for(lab.oscar).post(URL, submission(gpus=16), format="json")
    assert response.status_code == 201


def _submit(lab, user, **overrides) -> int:  # noqa: ANN001
    response = client_for(user).post(URL, submission(**overrides), format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def test_the_list_filters_by_cluster_allocation_user_state_and_class(lab):
    _submit(lab, lab.bob, workload_class="debug")
    _submit(lab, lab.dave, allocation="lab/language")
    client = client_for(lab.charlie)
    assert len(client.get(URL, {"user": "bob"}).json()["results"]) == 1
    assert len(client.get(URL, {"allocation": "lab/language"}).json()["results"]) == 1
    assert len(client.get(URL, {"class": "debug"}).json()["results"]) == 1
    assert len(client.get(URL, {"state": "pending", "cluster": "main"}).json()["results"]) == 2
    assert client.get(URL, {"state": "running"}).json()["results"] == []


def test_the_list_costs_the_same_queries_for_two_or_twenty_workloads(lab, django_assert_num_queries):
    for _ in range(20):
        _submit(lab, lab.bob)
    client = client_for(lab.charlie)
    with django_assert_num_queries(
        3
    ):  # count + one joined page + the reader's memberships (who sees commands)
        assert len(client.get(URL).json()["results"]) == 20


def test_the_detail_shows_the_pending_reason_position_and_estimated_start(lab):
    workload_id = _submit(lab, lab.bob)
    PendingReason.objects.create(
        workload_id=workload_id,
        code="WAITING_FOR_GPUS",
        message="needs 4 GPUs on one node",
        params={"gpus": 4},
        position=3,
        updated_at="2026-03-02T09:00:00Z",
    )
    body = client_for(lab.charlie).get(f"{URL}{workload_id}/").json()
    assert body["pending_reason"]["code"] == "WAITING_FOR_GPUS"
    assert body["pending_reason"]["position"] == 3
    assert "estimated_start" in body["pending_reason"]
    assert body["runs"] == []


def test_the_owner_holds_and_releases_a_pending_workload(lab):
    workload_id = _submit(lab, lab.bob)
    client = client_for(lab.bob)
    held = client.post(f"{URL}{workload_id}/hold/", {"note": "wait for data"}, format="json").json()
    assert held["held"] is True and held["held_by"] == "bob" and held["held_note"] == "wait for data"
    assert client.post(f"{URL}{workload_id}/release/").json()["held"] is False


def test_a_manager_of_the_allocation_may_cancel_a_members_workload(lab):
    workload_id = _submit(lab, lab.bob)
    response = client_for(lab.alice).post(f"{URL}{workload_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["state"] == WorkloadState.CANCELLED


def test_another_member_may_not_cancel_someone_elses_workload(lab):
    workload_id = _submit(lab, lab.bob)
    response = client_for(lab.dave).post(f"{URL}{workload_id}/cancel/")
    assert response.status_code == 403
    assert Workload.objects.get(pk=workload_id).state == WorkloadState.PENDING


def test_cancelling_twice_is_a_conflict_not_a_crash(lab):
    workload_id = _submit(lab, lab.bob)
    client = client_for(lab.bob)
    client.post(f"{URL}{workload_id}/cancel/")
    response = client.post(f"{URL}{workload_id}/cancel/")
    assert response.status_code == 409
    assert "already cancelled" in response.json()["detail"]
    assert not Decision.objects.exists()  # never reached the backend: nothing to cancel there


def test_an_unknown_workload_is_a_404(lab):
    assert client_for(lab.bob).get(f"{URL}999999/").status_code == 404


def test_after_a_pass_the_detail_explains_a_queued_workload_and_shows_the_running_ones_run(lab):
    from scheduling.passes import run_pass

    big = _submit(lab, lab.oscar, allocation="lab/language", gpus=32, min_runtime_s=3600)
    queued = _submit(lab, lab.bob, gpus=8)
    assert run_pass(cluster_id=lab.main.pk).ran
    client = client_for(lab.charlie)
    waiting = client.get(f"{URL}{queued}/").json()
    assert waiting["state"] == "pending"
    assert waiting["pending_reason"]["position"] == 1
    assert waiting["pending_reason"]["code"] in set(ReasonCode)  # which one is the policy's business
    assert waiting["pending_reason"]["message"]
    running = client.get(f"{URL}{big}/").json()
    assert running["state"] == "running" and running["pending_reason"] is None
    assert running["runs"][0]["attempt"] == 1 and running["runs"][0]["ended_at"] is None
