"""The persona pages and their API: what a manager, a researcher and on-call would check."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.metrics import pyramid_now
from tests.pages.conftest import NOW, client_for


def _text(response) -> str:  # noqa: ANN001
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


# --- home -----------------------------------------------------------------------------------------------


def test_a_researcher_sees_their_workloads_and_why_the_first_is_pending(history, frozen_now):
    page = _text(client_for(history.bob).get("/"))
    first = history.bob_pending.first()
    assert first.pending_reason.message in page
    assert re.search(r'data-count="pending">\s*6<', page)


def test_a_manager_sees_delivered_over_owed_for_the_node_they_manage(history, frozen_now):
    api = client_for(history.alice).get("/api/v1/home/").json()
    (line,) = [a for a in api["allocations"] if a["path"] == "lab/vision"]
    page = _text(client_for(history.alice).get("/"))
    assert f"{line['delivered_owed_ratio'] * 100:.1f}%" in page
    assert "Manager</strong> of <code>lab/vision</code>" in page


def test_on_call_without_roles_sees_the_top_level_and_the_pyramid(history, frozen_now):
    api = client_for(history.oscar).get("/api/v1/home/").json()
    assert [a["path"] for a in api["allocations"]] == ["lab"]
    availability = api["pyramids"]["main"]["availability"]
    assert availability == 24 / 32
    assert "75.0%" in _text(client_for(history.oscar).get("/"))


def test_home_reads_a_fixed_number_of_queries(history, frozen_now, django_assert_num_queries):
    client = client_for(history.alice)
    with django_assert_num_queries(11):
        client.get("/")


# --- the pyramid and waits -------------------------------------------------------------------------------


def test_the_pyramid_page_shows_the_api_numbers_and_plotly_charts(history, frozen_now):
    client = client_for(history.oscar)
    api = client.get("/api/v1/pyramid/main/?days=7").json()
    page = _text(client.get("/metrics/main/?days=7"))
    now = api["now"]
    assert f"{now['occupancy'] * 100:.1f}%" in page
    assert f"{now['impact'] * 100:.1f}%" in page
    assert f"{now['allocations_at_95pct']} of {now['allocations_owed']} allocations" in page
    assert 'id="chart-pyramid"' in page and 'id="chart-pyramid-figure"' in page
    assert "plotly/plotly-basic.min.js" in page
    assert len(api["series"]["time"]) == 7 * 24


def test_the_pyramid_drills_down_to_unhealthy_nodes_and_idle_workloads(history, frozen_now):
    api = client_for(history.oscar).get("/api/v1/pyramid/main/").json()
    assert [n["name"] for n in api["unhealthy_nodes"]] == ["n3"]
    assert [s["busy_pct"] for s in api["idle_but_held"]] == [3.0]
    page = _text(client_for(history.oscar).get("/metrics/main/"))
    assert "n3" in page and "3.0%" in page


def test_the_pyramid_reads_rollups_in_a_fixed_number_of_queries(
    history, frozen_now, django_assert_num_queries
):
    client = client_for(history.oscar)
    for days in (7, 90):
        with django_assert_num_queries(14):
            client.get(f"/metrics/main/?days={days}")


def test_impact_over_the_week_matches_the_rollups(history):
    numbers = pyramid_now(cluster=history.main, now=NOW, days=7)
    assert 0.6 < numbers.impact < 1.2
    assert numbers.allocations_owed == 3  # the funded leaves: language, perception, generation


def test_queue_waits_show_p50_per_class_as_the_api_does(history, frozen_now):
    client = client_for(history.bob)
    api = client.get("/api/v1/waits/main/?days=30").json()
    assert {c["workload_class"] for c in api["classes"]} == {"batch", "debug", "interactive"}
    page = _text(client.get("/metrics/main/waits/?days=30"))
    assert 'id="chart-waits"' in page
    for row in api["classes"]:
        assert f'data-p50="{row["p50_s"]}"' in page
    assert f">{api['preemptions']:,}<" in page


def test_waits_read_a_fixed_number_of_queries(history, frozen_now, django_assert_num_queries):
    client = client_for(history.bob)
    with django_assert_num_queries(6):
        client.get("/metrics/main/waits/?days=90")


# --- delivery ---------------------------------------------------------------------------------------------


def test_delivery_of_a_program_lists_its_teams_and_flags_those_under_95_percent(history, frozen_now):
    client = client_for(history.alice)
    api = client.get(f"/api/v1/delivery/main/{history.vision.pk}/?days=7").json()
    page = _text(client.get(f"/budgets/delivery/main/{history.vision.pk}/?days=7"))
    assert [c["path"] for c in api["children"]] == ["lab/vision/generation", "lab/vision/perception"]
    assert f"{api['delivered_owed_ratio'] * 100:.1f}%" in page
    flagged = [c for c in api["children"] if c["under_95pct"]]
    assert page.count("under 95%") == len(flagged)
    assert 'id="chart-delivery"' in page and "Entitlement" in page
    assert {c["cause"] for c in api["undelivered_by_cause"]} >= {
        "no_demand",
        "waiting",
        "fragmentation",
        "preemption",
        "unhealthy",
    }


def test_delivered_of_a_node_is_the_sum_of_its_children(history, frozen_now):
    api = client_for(history.alice).get(f"/api/v1/delivery/main/{history.org.pk}/").json()
    assert api["delivered_gpu_hours"] == pytest.approx(sum(c["delivered_gpu_hours"] for c in api["children"]))
    assert api["entitlement_gpus"] == 24.0


def test_delivery_reads_a_fixed_number_of_queries_whatever_the_period(
    history, frozen_now, django_assert_num_queries
):
    client = client_for(history.alice)
    for days in (7, 90):
        with django_assert_num_queries(21):
            client.get(f"/budgets/delivery/main/{history.vision.pk}/?days={days}")


def test_the_fair_share_ratio_is_the_one_the_last_pass_ranked_with(history, frozen_now):
    from scheduling.models import SchedulingPass

    SchedulingPass.objects.create(
        cluster=history.main, started_at=NOW, finished_at=NOW, fair_share={"lab/vision": 1.31}
    )
    api = client_for(history.alice).get(f"/api/v1/delivery/main/{history.vision.pk}/").json()
    assert api["fair_share_ratio"] == 1.31
    assert "1.31×" in _text(client_for(history.alice).get(f"/budgets/delivery/main/{history.vision.pk}/"))


def test_an_unknown_node_or_cluster_is_a_404(history):
    client = client_for(history.bob)
    assert client.get("/budgets/delivery/main/99999/").status_code == 404
    assert client.get("/metrics/nowhere/").status_code == 404
    assert client.get("/api/v1/queue/nowhere/").status_code == 404


def test_pages_need_a_login(history):
    from django.test import Client

    assert Client().get("/metrics/main/").status_code == 302
    assert Client().get("/api/v1/pyramid/main/").status_code in (401, 403)


# --- the queue and why pending -----------------------------------------------------------------------------


def test_the_queue_lists_pending_work_in_scheduling_order_with_sentences(history, frozen_now):
    client = client_for(history.bob)
    api = client.get("/api/v1/queue/main/").json()
    assert [row["position"] for row in api["results"]] == sorted(row["position"] for row in api["results"])
    page = _text(client.get("/scheduling/queue/main/"))
    assert api["results"][0]["reason"] in page
    assert f'data-pending="{api["workloads"]}"' in page


def test_only_the_rows_one_may_act_on_show_an_actions_label_on_a_phone(history, frozen_now):
    """On a phone each cell shows its label; a row bob may not act on has no empty "Actions:"."""
    page = _text(client_for(history.bob).get("/scheduling/queue/main/"))
    cells = dict(re.findall(r'<tr data-workload="(\d+)"(.*?)</tr>', page, flags=re.S))
    bobs = {str(pk) for pk in history.bob_pending.values_list("pk", flat=True)}
    assert bobs & set(cells) and set(cells) - bobs, "the page shows bob's rows and others'"
    for pk, cell in cells.items():
        assert ('data-label="Actions"' in cell) == (pk in bobs), pk


def test_a_filtered_queue_refresh_returns_only_the_rows_and_keeps_the_filter(history, frozen_now):
    client = client_for(history.bob)
    fragment = _text(
        client.get("/scheduling/queue/main/?user=bob&class=batch", headers={"HX-Request": "true"})
    )
    assert fragment.lstrip().startswith('<section class="card" id="queue-rows"')
    assert "<html" not in fragment
    assert 'hx-get="/scheduling/queue/main/?user=bob&amp;class=batch"' in fragment
    api = client.get("/api/v1/queue/main/?user=bob&class=batch").json()
    assert {row["user"] for row in api["results"]} == {"bob"}
    assert {row["workload_class"] for row in api["results"]} == {"batch"}


def test_the_queue_reads_a_fixed_number_of_queries(history, frozen_now, django_assert_num_queries):
    client = client_for(history.bob)
    with django_assert_num_queries(7):  # the 7th: bob's memberships, for the rows he may cancel or hold
        client.get("/scheduling/queue/main/")


def test_why_is_my_job_pending_gives_the_sentence_position_and_contract(history, frozen_now):
    workload = history.bob_pending.last()
    client = client_for(history.bob)
    api = client.get(f"/api/v1/workloads/{workload.pk}/why-pending/").json()
    page = _text(client.get(f"/scheduling/workloads/{workload.pk}/"))
    assert api["reason"] == workload.pending_reason.message
    assert workload.pending_reason.message in page
    assert api["position"] == workload.pending_reason.position
    assert api["contract"]["minimum_runtime_s"] == 3600
    assert "1 h" in page  # minimum runtime


def test_the_fair_tree_comparison_names_the_branches_ahead_at_the_first_shared_ancestor(history, frozen_now):
    workload = history.bob_pending.last()  # lab/vision/... with work from lab/language ahead
    api = client_for(history.bob).get(f"/api/v1/workloads/{workload.pk}/why-pending/").json()
    ancestors = {row["ancestor"]: row["branches"] for row in api["fair_tree"]["first_shared_ancestors"]}
    assert "lab" in ancestors
    yours = [b for b in ancestors["lab"] if b["yours"]]
    assert [b["path"] for b in yours] == ["lab/vision"]
    assert any(b["path"] == "lab/language" and b["ahead"] > 0 for b in ancestors["lab"])


def test_a_workload_page_reads_a_fixed_number_of_queries(history, frozen_now, django_assert_num_queries):
    workload = history.bob_pending.last()
    client = client_for(history.bob)
    with django_assert_num_queries(12):  # bob's own work (by name): no membership read for the buttons
        client.get(f"/scheduling/workloads/{workload.pk}/")


def test_the_options_to_start_sooner_come_from_the_policy(history, frozen_now):
    workload = history.bob_pending.last()
    response = client_for(history.bob).get(f"/api/v1/workloads/{workload.pk}/start-options/").json()
    assert response["options"], "a pending workload gets at least 'as it is' or an option"
    for option in response["options"]:
        assert option["starts_now"] or option["estimated_start"]


def test_the_glossary_explains_every_term_used_inline(history):
    client = client_for(history.bob)
    glossary = _text(client.get("/glossary/"))
    page = _text(client.get("/metrics/main/"))
    for slug in set(re.findall(r'data-term="([a-z-]+)"', page)):
        assert f'id="{slug}"' in glossary


def test_the_captured_queries_never_scan_runs_on_the_rollup_pages(history, frozen_now):
    client = client_for(history.oscar)
    for url in (
        "/metrics/main/?days=90",
        "/metrics/main/waits/?days=90",
        f"/budgets/delivery/main/{history.org.pk}/?days=90",
    ):
        with CaptureQueriesContext(connection) as captured:
            client.get(url)
        scans = [
            q["sql"]
            for q in captured.captured_queries
            if 'FROM "scheduling_run"' in q["sql"] and "ended_at" not in q["sql"]
        ]
        assert scans == [], url


@pytest.mark.parametrize(
    ("url", "queries"),
    [
        ("/api/v1/home/", 12),
        ("/api/v1/pyramid/main/?days=90", 13),
        ("/api/v1/waits/main/?days=90", 5),
        ("/api/v1/queue/main/", 5),
        ("/api/v1/glossary/", 2),
    ],
    ids=["home", "pyramid", "waits", "queue", "glossary"],
)
def test_the_api_reads_a_fixed_number_of_queries(
    history, frozen_now, django_assert_num_queries, url, queries
):
    client = client_for(history.oscar)
    with django_assert_num_queries(queries):
        assert client.get(url).status_code == 200


def test_a_cluster_without_history_says_so_instead_of_drawing_empty_charts(lab, frozen_now):
    page = _text(client_for(lab.oscar).get("/metrics/main/"))
    assert "No history for this period yet" in page
    assert "data-chart" not in page
    assert "75.0%" in page  # availability now comes from the nodes themselves


def test_the_options_are_computed_once_per_pass(history, frozen_now, django_assert_num_queries):
    from django.core.cache import cache

    from scheduling.models import SchedulingPass

    cache.clear()
    workload = history.bob_pending.last()
    client = client_for(history.bob)
    first = client.get(f"/api/v1/workloads/{workload.pk}/start-options/").json()
    with django_assert_num_queries(4):  # session, user, workload, latest pass: no snapshot read
        assert client.get(f"/api/v1/workloads/{workload.pk}/start-options/").json() == first
    SchedulingPass.objects.create(cluster=history.main, started_at=NOW, finished_at=NOW)
    with CaptureQueriesContext(connection) as after_a_pass:
        client.get(f"/api/v1/workloads/{workload.pk}/start-options/")
    assert len(after_a_pass.captured_queries) > 4, "a new pass re-plans"
