"""The what-if panel: recorded workloads (and the rollups' history) replayed with edited budgets."""

from __future__ import annotations

from datetime import timedelta

import pytest

from budgets.delivery import delivery_report
from budgets.whatif import compare_results, parse_api, parse_form, whatif_execute
from budgets.whatif_replay import SYNTHETIC_KIND, recorded_jobs, replay_build
from portal.models import WhatIfRun
from portal.templatetags.portal_help import num, pct
from tests.pages.conftest import NOW, client_for


def test_recorded_workloads_become_jobs_that_last_as_long_as_they_ran(history):
    jobs = {
        job.id: job for job in recorded_jobs(cluster=history.main, start=NOW - timedelta(days=2), now=NOW)
    }
    finished = [job for job in jobs.values() if job.duration_s == 2 * 3600 + (5 * 3600 - 2 * 3600 - 13 * 60)]
    assert finished, "a finished workload's two runs add up to its duration"
    assert all(job.submit_s >= 0 for job in jobs.values())


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("abc", "is not a number of GPUs"),
        ("-3", "cannot be negative"),
        ("nan", "finite number"),
        ("inf", "finite number"),
        ("1e12", "Larger than the cluster (32 GPUs)"),
        ("33", "Larger than the cluster (32 GPUs)"),
    ],
    ids=["non-numeric", "negative", "nan", "infinite", "huge", "one-more-than-the-cluster"],
)
def test_a_bad_budget_is_refused_with_a_field_error(history, value, error):
    edits = parse_form(data={f"budget-{history.vision.pk}": value, "days": "7"}, cluster=history.main)
    assert error in edits.errors[f"budget-{history.vision.pk}"]
    assert edits.budgets == {}


def test_zero_blank_and_whole_cluster_budgets_are_valid_and_unknown_nodes_are_refused(history):
    edits = parse_form(
        data={f"budget-{history.vision.pk}": "0", f"budget-{history.language.pk}": "32",
              f"budget-{history.perception.pk}": "  ", "budget-999999": "5", "budget-x": "1", "days": "14"},
        cluster=history.main,
    )  # fmt: skip
    assert edits.budgets == {"lab/vision": 0.0, "lab/language": 32.0}
    assert set(edits.errors) == {"budget-999999", "budget-x"} and edits.days == 14


def test_the_api_reads_budgets_by_path_and_reports_errors_by_path(history):
    edits = parse_api(
        data={"days": 3, "budgets": {"lab/vision": "abc", "lab/language": 0}}, cluster=history.main
    )
    assert edits.budgets == {"lab/language": 0.0}
    assert set(edits.errors) == {"budgets", "days"} and set(edits.errors["budgets"]) == {"lab/vision"}


def test_the_comparison_puts_changed_budgets_first_and_reads_a_missing_side_as_zero():
    before = [{"allocation": "a", "delivered_owed_ratio": 0.5, "delivered_gpu_hours": 5, "owed_gpu_hours": 10},
              {"allocation": "b", "delivered_owed_ratio": 1.0, "delivered_gpu_hours": 10, "owed_gpu_hours": 10}]  # fmt: skip
    after = [{"allocation": "a", "delivered_owed_ratio": 0.9, "delivered_gpu_hours": 9, "owed_gpu_hours": 10}]
    result = compare_results(before, after, current={"a": 1, "b": 4}, edited={"a": 1, "b": 0})
    assert [row["allocation"] for row in result["rows"]] == ["b", "a"]
    cut = result["rows"][0]
    assert (cut["after_ratio"], cut["after_delivered_gpu_h"], cut["after_owed_gpu_h"]) == (None, 0.0, 0.0)
    assert result["totals"]["before_delivered_gpu_h"] == 15 and result["totals"]["after_delivered_gpu_h"] == 9
    nested = compare_results([{**before[0], "allocation": "b/x"}], [], current={"b": 4}, edited={"b": 2})
    assert nested["rows"][0]["changed"], "an allocation under an edited node is affected too"


@pytest.mark.parametrize("value", ["", "abc", None, float("nan"), float("inf")], ids=repr)
def test_pct_and_num_show_a_dash_for_what_is_not_a_number(value):
    assert pct(value) == "—" and num(value) == "—"
    assert pct(0.9731) == "97.3%" and num(1234.5, 0) == "1,234"


def test_a_zero_gpu_budget_replays_and_shows_gpu_hours_before_and_after(history, frozen_now):
    run = WhatIfRun.objects.create(
        cluster=history.main, days=2, budgets={"lab/language": 0.0}, requested_by=history.alice
    )
    whatif_execute(run.pk)
    run.refresh_from_db()
    assert (run.status, run.progress, run.error) == ("done", 1.0, "")
    (language,) = [row for row in run.result["rows"] if row["allocation"] == "lab/language"]
    assert (language["budget_before"], language["budget_after"], language["changed"]) == (8.0, 0.0, True)
    assert language["before_delivered_gpu_h"] > 0 and language["before_ratio"] is not None
    assert language["after_owed_gpu_h"] == 0.0 and language["after_ratio"] is None  # owed nothing: no ratio
    assert run.result["replayed"]["recorded"] > 0 and run.result["waits"]
    page = client_for(history.alice).get(f"/budgets/whatif/runs/{run.pk}/", headers={"HX-Request": "true"})
    text = page.content.decode()
    assert page.status_code == 200 and 'data-status="done"' in text and "hx-trigger" not in text
    assert "Delivered GPU-h" in text and f"{language['before_delivered_gpu_h']:,.0f}" in text
    assert f"{run.result['replayed']['recorded']} recorded workload" in text
    api = client_for(history.alice).get(f"/api/v1/whatif/runs/{run.pk}/").json()
    assert api["result"]["rows"] == run.result["rows"]


def test_the_weeks_replay_matches_the_delivery_pages_delivered_gpu_hours(history, frozen_now):
    """The history is mostly rollups (as in the demo): the replay rebuilds it to the same scale."""
    replay = replay_build(cluster=history.main, budgets={}, now=NOW, days=7)
    assert replay.synthesized > 0 and replay.recorded > 0
    assert sum(job.kind == SYNTHETIC_KIND for job in replay.inputs.jobs) == replay.synthesized
    run = WhatIfRun.objects.create(cluster=history.main, days=7, budgets={}, requested_by=history.alice)
    whatif_execute(run.pk)
    run.refresh_from_db()
    replayed = run.result["totals"]["before_delivered_gpu_h"]
    page = delivery_report(node=history.org, cluster=history.main, user=history.alice, now=NOW, days=7)
    assert page.delivered_gpu_h > 1000
    print(
        f"replayed {replayed:.0f} GPU-h of {replay.recorded} recorded + {replay.synthesized} rebuilt jobs; page {page.delivered_gpu_h:.0f}"
    )
    assert replayed == pytest.approx(page.delivered_gpu_h, rel=0.20), (replayed, page.delivered_gpu_h)


def test_a_failed_run_shows_its_error_and_stops_polling(history):
    run = WhatIfRun.objects.create(cluster=history.main, days=7, status="failed", error="ValueError: boom",
                                   requested_by=history.alice)  # fmt: skip
    text = client_for(history.alice).get(f"/budgets/whatif/runs/{run.pk}/", headers={"HX-Request": "true"})
    assert "The what-if failed: ValueError: boom" in text.content.decode()
    assert "hx-trigger" not in text.content.decode()


def test_a_run_no_worker_finished_in_time_fails_instead_of_polling_for_ever(history, settings):
    run = WhatIfRun.objects.create(cluster=history.main, days=7, requested_by=history.alice)
    WhatIfRun.objects.filter(pk=run.pk).update(
        created_at=run.created_at - timedelta(seconds=settings.WHATIF_STALE_S + 1)
    )
    text = client_for(history.alice).get(f"/budgets/whatif/runs/{run.pk}/", headers={"HX-Request": "true"})
    assert 'data-status="failed"' in text.content.decode() and "No worker finished" in text.content.decode()


def test_a_running_what_if_polls_for_its_progress(history):
    run = WhatIfRun.objects.create(cluster=history.main, days=7, status="running", progress=0.4,
                                   requested_by=history.alice)  # fmt: skip
    fragment = client_for(history.alice).get(
        f"/budgets/whatif/runs/{run.pk}/", headers={"HX-Request": "true"}
    )
    text = fragment.content.decode()
    assert 'hx-trigger="every 1s"' in text and "40%" in text
    assert "<html" not in text


def test_a_run_is_visible_to_its_author_and_staff_only(history):
    run = WhatIfRun.objects.create(cluster=history.main, days=7, requested_by=history.alice)
    assert client_for(history.bob).get(f"/budgets/whatif/runs/{run.pk}/").status_code == 404
    assert client_for(history.bob).get(f"/api/v1/whatif/runs/{run.pk}/").status_code == 404
    assert client_for(history.alice).get(f"/budgets/whatif/runs/{run.pk}/").status_code == 200
    assert client_for(history.oscar).get(f"/api/v1/whatif/runs/{run.pk}/").status_code == 200


def test_posting_the_form_queues_a_run_and_redirects_to_its_progress(
    history, django_capture_on_commit_callbacks
):
    client = client_for(history.alice)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/budgets/whatif/main/", {"days": "7", f"budget-{history.vision.pk}": "0"})
    run = WhatIfRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/budgets/whatif/runs/{run.pk}/"
    assert run.budgets == {"lab/vision": 0.0} and run.status == "queued" and run.requested_by == history.alice
    assert len(callbacks) == 1  # the Celery task is queued once the row is committed


def test_a_non_numeric_budget_is_shown_beside_its_field_and_nothing_runs(history):
    response = client_for(history.alice).post(
        "/budgets/whatif/main/", {"days": "7", f"budget-{history.vision.pk}": "abc"}
    )
    text = response.content.decode()
    assert response.status_code == 400
    assert f'id="budget-{history.vision.pk}-errors"' in text and "“abc” is not a number of GPUs" in text
    assert 'value="abc"' in text  # what was typed stays in the field
    assert not WhatIfRun.objects.exists()


def test_a_second_run_of_the_same_user_is_refused_while_the_first_is_active(
    history, django_capture_on_commit_callbacks
):
    client = client_for(history.alice)
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post("/budgets/whatif/main/", {"days": "7"}).status_code == 302
        second = client.post("/budgets/whatif/main/", {"days": "7"})
        api = client.post("/api/v1/whatif/main/", {"budgets": {}}, content_type="application/json")
    assert second.status_code == 429 and "already have a what-if running" in second.content.decode()
    assert api.status_code == 429 and "already have a what-if running" in api.json()["detail"]
    assert WhatIfRun.objects.count() == 1


def test_the_site_cap_refuses_another_users_run(history, settings, django_capture_on_commit_callbacks):
    settings.WHATIF_MAX_ACTIVE = 1
    WhatIfRun.objects.create(cluster=history.main, days=7, requested_by=history.alice, status="running")
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(history.oscar).post("/budgets/whatif/main/", {"days": "7"})
    assert response.status_code == 429 and "1 what-ifs are already running" in response.content.decode()


def test_a_researcher_may_look_but_not_start_a_replay(history):
    client = client_for(history.bob)
    assert "Managers and on-call staff may run" in client.get("/budgets/whatif/main/").content.decode()
    assert client.post("/budgets/whatif/main/", {"days": "7"}).status_code == 403
    assert (
        client.post("/api/v1/whatif/main/", {"budgets": {}}, content_type="application/json").status_code
        == 403
    )
    assert not WhatIfRun.objects.exists()


def test_a_bad_replay_length_is_a_field_error(history):
    response = client_for(history.oscar).post("/budgets/whatif/main/", {"days": "forever"})
    assert response.status_code == 400 and "Choose one of 1, 7, 14, 28 days." in response.content.decode()
    assert not WhatIfRun.objects.exists()
