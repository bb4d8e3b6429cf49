"""The what-if panel: recorded workloads replayed through the simulator with edited budgets."""

from __future__ import annotations

from datetime import timedelta

from budgets.whatif import compare_results, parse_budget_edits, recorded_jobs, whatif_execute
from portal.models import WhatIfRun
from tests.pages.conftest import NOW, client_for


def test_recorded_workloads_become_jobs_that_last_as_long_as_they_ran(history):
    jobs = {
        job.id: job for job in recorded_jobs(cluster=history.main, start=NOW - timedelta(days=2), now=NOW)
    }
    finished = [job for job in jobs.values() if job.duration_s == 2 * 3600 + (5 * 3600 - 2 * 3600 - 13 * 60)]
    assert finished, "a finished workload's two runs add up to its duration"
    assert all(job.submit_s >= 0 for job in jobs.values())


def test_budget_edits_are_read_by_node_and_bad_numbers_ignored(history):
    edits = parse_budget_edits(
        {
            f"budget-{history.vision.pk}": "20",
            f"budget-{history.language.pk}": "lots",
            "budget-999999": "5",
            "x": "1",
        }
    )
    assert edits == {"lab/vision": 20.0}


def test_the_comparison_puts_changed_budgets_first():
    before = [{"allocation": "a", "delivered_owed_ratio": 0.5, "delivered_gpu_hours": 5, "owed_gpu_hours": 10},
              {"allocation": "b", "delivered_owed_ratio": 1.0, "delivered_gpu_hours": 10, "owed_gpu_hours": 10}]  # fmt: skip
    after = [{"allocation": "a", "delivered_owed_ratio": 0.9, "delivered_gpu_hours": 9, "owed_gpu_hours": 10}]
    result = compare_results(before, after, current={"a": 1, "b": 4}, edited={"a": 1, "b": 2})
    assert [row["allocation"] for row in result["rows"]] == ["b", "a"]
    nested = compare_results([{**before[0], "allocation": "b/x"}], [], current={"b": 4}, edited={"b": 2})
    assert nested["rows"][0]["changed"], "an allocation under an edited node is affected too"
    assert result["edited"] == ["b"]
    assert result["rows"][1]["after_ratio"] == 0.9


def test_a_what_if_runs_the_simulator_and_reports_delivery_before_and_after(history, frozen_now):
    run = WhatIfRun.objects.create(cluster=history.main, days=2, budgets={"lab/language": 1.0})
    whatif_execute(run.pk)
    run.refresh_from_db()
    assert (run.status, run.progress, run.error) == ("done", 1.0, "")
    assert run.result["edited"] == ["lab/language"]
    (language,) = [row for row in run.result["rows"] if row["allocation"] == "lab/language"]
    assert (language["budget_before"], language["budget_after"], language["changed"]) == (8.0, 1.0, True)
    assert language["before_ratio"] is not None and language["after_ratio"] is not None
    assert run.result["rows"][0]["allocation"] == "lab/language"  # the changed budget comes first
    page = client_for(history.alice).get(f"/budgets/whatif/runs/{run.pk}/", headers={"HX-Request": "true"})
    assert 'data-status="done"' in page.content.decode()
    api = client_for(history.alice).get(f"/api/v1/whatif/runs/{run.pk}/").json()
    assert api["result"]["rows"] == run.result["rows"]


def test_a_running_what_if_polls_for_its_progress(history):
    run = WhatIfRun.objects.create(cluster=history.main, days=7, status="running", progress=0.4)
    fragment = client_for(history.alice).get(
        f"/budgets/whatif/runs/{run.pk}/", headers={"HX-Request": "true"}
    )
    text = fragment.content.decode()
    assert 'hx-trigger="every 1s"' in text and "40%" in text
    assert "<html" not in text


def test_posting_the_form_queues_a_run_and_redirects_to_its_progress(
    history, django_capture_on_commit_callbacks
):
    client = client_for(history.alice)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/budgets/whatif/main/", {"days": "7", f"budget-{history.vision.pk}": "16"})
    run = WhatIfRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/budgets/whatif/runs/{run.pk}/"
    assert run.budgets == {"lab/vision": 16.0} and run.status == "queued"
    assert len(callbacks) == 1  # the background thread starts once the row is committed


def test_a_researcher_may_look_but_not_start_a_replay(history):
    client = client_for(history.bob)
    assert "Managers and on-call staff may run" in client.get("/budgets/whatif/main/").content.decode()
    assert client.post("/budgets/whatif/main/", {"days": "7"}).status_code == 403
    assert (
        client.post("/api/v1/whatif/main/", {"budgets": {}}, content_type="application/json").status_code
        == 403
    )
    assert not WhatIfRun.objects.exists()


def test_a_bad_replay_length_falls_back_to_a_week(history, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        client_for(history.oscar).post("/budgets/whatif/main/", {"days": "forever"})
    assert WhatIfRun.objects.get().days == 7
