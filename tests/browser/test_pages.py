"""Each persona's pages in a real browser: numbers match the API, charts draw, the queue refreshes.

Screenshots of every page at 1280 and 390 px land in test-artifacts/. One test per persona and
width, so the demo data is loaded a handful of times, not once per page.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import pytest
from django.db import connection

from budgets.models import BudgetNode
from scheduling.models import PendingReason, Workload
from tests.browser.pages_fixtures import demo_history  # noqa: F401 - a fixture
from tests.workers import unique_queue, worker_running

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("demo_history"),
]
BOTH = pytest.mark.parametrize("viewport", [1280, 390], indirect=True)


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as exits:
        yield exits


def _api(page, path: str) -> dict:  # noqa: ANN001
    """GET an API endpoint with the browser's own session, as a person's script would."""
    return page.evaluate(f"fetch({path!r}).then(r => r.json())")


def _chart_has_data(page, div_id: str) -> bool:  # noqa: ANN001
    page.wait_for_selector(f"#{div_id}.js-plotly-plot")
    return page.evaluate(f"document.getElementById({div_id!r}).data.some(t => (t.y || t.x || []).length > 0)")


def _tile(page, metric: str, scope: str = "") -> str:  # noqa: ANN001
    return page.text_content(f"{scope} [data-metric={metric}] .value").strip()


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


@BOTH
def test_the_researcher_finds_why_their_job_is_pending(
    page, live_server, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("researcher")
    mine = Workload.objects.filter(user_name="researcher", state="pending", cluster__slug="main").order_by(
        "pending_reason__position"
    )
    last = mine.last()
    counts = _api(page, "/api/v1/home/")["state_counts"]
    assert page.text_content("#my-workloads [data-count=pending]") == str(counts["pending"])
    assert page.text_content("#my-workloads [data-count=running]") == str(counts["running"])
    screenshot(f"pages-home-researcher-{viewport}")

    page.goto(f"{live_server.url}/scheduling/workloads/{last.pk}/")
    assert page.text_content("#pending-sentence").strip() == last.pending_reason.message
    api = _api(page, f"/api/v1/workloads/{last.pk}/why-pending/")
    assert page.text_content("[data-position]").strip() == str(api["position"])
    page.wait_for_selector(
        '#options [data-starts], #options p.muted:not(:has-text("Asking"))'
    )  # the policy answered
    screenshot(f"pages-why-pending-{viewport}")
    assert console_errors == []


@BOTH
def test_the_queue_keeps_its_filter_when_it_refreshes_itself(
    page, live_server, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("researcher")
    page.goto(f"{live_server.url}/scheduling/queue/main/")
    api = _api(page, "/api/v1/queue/main/")
    assert page.get_attribute("[data-pending]", "data-pending") == str(api["workloads"])
    first = api["results"][0]
    assert page.text_content(f"tr[data-workload='{first['id']}']").count(first["reason"]) == 1

    page.select_option("select[name=class]", "batch")
    page.wait_for_url(re.compile(r"class=batch"))
    page.wait_for_function("document.querySelectorAll('#queue-rows tr[data-workload]').length > 0")
    rows = page.locator("#queue-rows tr[data-workload]")
    assert set(rows.locator("td[data-class]").all_text_contents()) == {"batch"}

    workload_id = int(rows.first.get_attribute("data-workload"))
    PendingReason.objects.filter(workload_id=workload_id).update(
        message="refreshed: 3 workloads are ahead of yours"
    )
    page.wait_for_selector("#queue-rows >> text=refreshed: 3 workloads are ahead of yours", timeout=15_000)
    assert set(page.locator("#queue-rows tr[data-workload] td[data-class]").all_text_contents()) == {"batch"}
    assert page.input_value("select[name=class]") == "batch"
    screenshot(f"pages-queue-{viewport}")
    assert console_errors == []


@BOTH
def test_the_manager_reads_delivery_against_allocation(
    page, live_server, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("manager")
    line = next(a for a in _api(page, "/api/v1/home/")["allocations"] if a["cluster"] == "main")
    row = page.locator(f"#my-allocations tr[data-node='{line['path']}'][data-cluster='main']")
    assert _pct(line["delivered_owed_ratio"]) in row.text_content()
    screenshot(f"pages-home-manager-{viewport}")

    row.locator("a").click()
    page.wait_for_selector("#chart-delivery")
    node_id = int(page.url.rstrip("/").split("/")[-1].split("?")[0])
    api = _api(page, f"/api/v1/delivery/main/{node_id}/?days=7")
    assert _tile(page, "ratio") == _pct(api["delivered_owed_ratio"])
    assert _chart_has_data(page, "chart-delivery") and _chart_has_data(page, "chart-causes")
    flagged = [c for c in api["children"] if c["under_95pct"]]
    assert page.locator("#children .flag.warn").count() == len(flagged)
    screenshot(f"pages-delivery-{viewport}")

    page.goto(f"{live_server.url}/budgets/whatif/main/")
    assert page.locator("input[name^=budget-]").count() > 40
    screenshot(f"pages-whatif-form-{viewport}")
    assert console_errors == []


@BOTH
def test_on_call_reads_the_pyramid_and_the_waits(
    page, live_server, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("oncall")
    api = _api(page, "/api/v1/home/")["pyramids"]["main"]
    assert _tile(page, "availability", "#pyramid-main") == _pct(api["availability"])
    screenshot(f"pages-home-oncall-{viewport}")

    page.goto(f"{live_server.url}/metrics/main/?days=7")
    api = _api(page, "/api/v1/pyramid/main/?days=7")
    for metric in ("availability", "impact", "utilization"):
        assert _tile(page, metric) == _pct(api["now"][metric])
    # The occupancy card is the chart's definition over the page's period, and says so.
    assert _tile(page, "occupancy") == _pct(api["period"]["occupancy"])
    assert "(7 days)" in page.text_content("[data-metric=occupancy] .label")
    for chart in ("chart-pyramid", "chart-occupancy", "chart-passes"):
        assert _chart_has_data(page, chart)
    assert page.locator("#squatting tbody tr").count() == len(api["idle_but_held"]) > 0
    screenshot(f"pages-pyramid-{viewport}")

    page.goto(f"{live_server.url}/metrics/main/waits/?days=30")
    waits = _api(page, "/api/v1/waits/main/?days=30")
    assert _tile(page, "preemptions") == f"{waits['preemptions']:,}"
    assert page.locator("#wait-table tbody tr").count() == len(waits["classes"])
    assert _chart_has_data(page, "chart-waits")
    screenshot(f"pages-waits-{viewport}")

    page.goto(f"{live_server.url}/glossary/")
    assert page.locator("dl.glossary dt").count() >= 15
    screenshot(f"pages-glossary-{viewport}")
    assert console_errors == []


def test_the_manager_replays_the_last_week_with_an_edited_budget(
    page, live_server, login, console_errors, screenshot, settings, stack
):  # noqa: ANN001
    """The replay runs as a Celery task on a real worker (its own queue of the Redis broker)."""
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip("the what-if worker cannot see an in-memory SQLite test database; run on PostgreSQL")
    queue = unique_queue("whatif")
    settings.WHATIF_QUEUE = queue
    worker = stack.enter_context(worker_running(queue, WHATIF_QUEUE=queue))
    assert worker.poll() is None
    login("manager")
    page.goto(f"{live_server.url}/budgets/whatif/main/")
    pretraining = BudgetNode.objects.get(path="lumen-lab/language/pretraining")
    page.fill(f"input[name=budget-{pretraining.pk}]", "10")
    page.click("#whatif-form button[type=submit]")
    page.wait_for_selector("#whatif-progress[data-status=done]", timeout=120_000)
    assert "recorded workload" in page.text_content("#whatif-replayed")
    assert page.locator("#whatif-allocations th", has_text="Delivered GPU-h").count() == 2
    changed = page.locator("#whatif-progress tr.mine")
    assert changed.count() >= 1
    assert all("lumen-lab/language/pretraining/" in row for row in changed.all_text_contents())
    assert _api(page, page.url.replace("/budgets/", "/api/v1/"))["status"] == "done"
    screenshot("pages-whatif-result-1280")
    assert console_errors == []
