"""Every page fits a 390 px phone and a 1280 px screen for every persona; the pyramid paints fast.

Widths: at 390 px the document is never wider than the screen (no sideways scrolling); at 1280 px
no table scrolls inside its card (no clipped column). Paint: first contentful paint and the first
drawn chart of the pyramid page, measured by the browser itself; both are written to
test-artifacts/paint-times.json.
"""

from __future__ import annotations

import json

import pytest

from budgets.models import BudgetNode
from scheduling.models import Workload, WorkloadState
from tests.browser.conftest import ARTIFACTS
from tests.demo_world import demo_lived_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PERSONAS = ("researcher", "manager", "oncall", "admin")
PAINT_BUDGET_MS = 1000  # the target on localhost
CHART_BUDGET_MS = 1500  # the first chart: the target plus this shared 2-core machine's jitter
FIRST_CHART_PROBE = """
window.__firstChartMs = null;
new MutationObserver(function () {
  if (window.__firstChartMs === null && document.querySelector(".js-plotly-plot .main-svg .trace")) {
    window.__firstChartMs = performance.now();
  }
}).observe(document, {subtree: true, childList: true});
"""


@pytest.fixture
def lived_in(transactional_db: None) -> None:
    """The demo organisation, a week of history and a few real passes (queues, reasons, decisions)."""
    demo_lived_in(days=7, passes=2)
    # The pyramid's "most preempted" table with its longest allocation paths, the width that clipped.
    longest = sorted(
        Workload.objects.filter(
            cluster__slug="main", state=WorkloadState.RUNNING, allocation__isnull=False
        ).select_related("allocation"),
        key=lambda workload: (-len(workload.allocation.path), workload.pk),
    )[:5]
    Workload.objects.filter(pk__in=[workload.pk for workload in longest]).update(requeue_count=12)


def every_page() -> list[str]:
    org = BudgetNode.objects.get(path="lumen-lab")
    urls = [
        "/",
        "/budgets/main/",
        f"/budgets/delivery/main/{org.pk}/",
        "/scheduling/queue/main/",
        "/scheduling/queue/h100/",
        "/metrics/main/",
        "/metrics/main/waits/",
        "/glossary/",
        "/budgets/whatif/main/",
    ]
    for state in (WorkloadState.PENDING, WorkloadState.RUNNING):
        if workload := Workload.objects.filter(state=state).order_by("id").first():
            urls.append(f"/scheduling/workloads/{workload.pk}/")
    return urls


def document_width(page) -> int:  # noqa: ANN001
    return page.evaluate("document.documentElement.scrollWidth")


def clipped_tables(page) -> list[str]:  # noqa: ANN001
    """Tables that scroll sideways inside their card: the section id of each."""
    return page.evaluate(
        """Array.from(document.querySelectorAll(".table-wrap"))
             .filter(wrap => wrap.scrollWidth > wrap.clientWidth + 1)
             .map(wrap => (wrap.closest("section") || {}).id || "?")"""
    )


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_page_fits_a_phone_and_clips_no_table_on_a_screen(
    persona, page, live_server, lived_in, login, screenshot
):  # noqa: ANN001
    login(persona)
    too_wide, clipped = {}, {}
    for url in every_page():
        for width, height in ((390, 844), (1280, 900)):
            page.set_viewport_size({"width": width, "height": height})
            response = page.goto(live_server.url + url)
            if response.status == 404:  # someone else's workload, for a researcher
                continue
            assert response.ok, (url, response.status)
            page.wait_for_load_state("load")
            if width == 390 and document_width(page) > 390:
                too_wide[url] = document_width(page)
                screenshot(f"too-wide-{persona}-{url.strip('/').replace('/', '-')}")
            if width == 1280 and clipped_tables(page):
                clipped[url] = clipped_tables(page)
            if url == "/metrics/main/":  # the table that clipped its Requeues column is really there
                assert page.locator("#most-preempted tbody tr").count() == 5
    assert too_wide == {}, "pages wider than a 390 px phone"
    assert clipped == {}, "tables that clip a column at 1280 px"


def test_the_queue_shows_a_page_of_cards_on_a_phone(page, live_server, lived_in, login):  # noqa: ANN001
    page.set_viewport_size({"width": 390, "height": 844})
    login("researcher")
    page.goto(live_server.url + "/scheduling/queue/h100/")
    rows = page.locator("#queue-rows tbody tr[data-workload]").count()
    pending = int(page.get_attribute("[data-pending]", "data-pending"))
    assert rows == min(pending, 25)
    if pending > 25:
        page.click("nav.pager a[rel=next]")
        assert page.locator("#queue-rows tbody tr[data-workload]").count() == min(pending - 25, 25)
        assert "Rows 26–" in page.text_content("nav.pager")


def test_the_pyramid_paints_its_numbers_first_and_a_chart_within_budget(
    browser, live_server, lived_in, login, page
):  # noqa: ANN001
    login("oncall")
    cookies = page.context.cookies()
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # a cold cache
    context.add_cookies(cookies)
    pyramid = context.new_page()
    pyramid.add_init_script(FIRST_CHART_PROBE)
    pyramid.goto(live_server.url + "/metrics/main/?days=7")
    pyramid.wait_for_function("window.__firstChartMs !== null", timeout=15_000)
    first_paint_ms = pyramid.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
    first_chart_ms = pyramid.evaluate("window.__firstChartMs")
    plotly_bytes = pyramid.evaluate(
        """performance.getEntriesByType("resource")
             .filter(entry => entry.name.includes("plotly")).map(entry => entry.decodedBodySize)[0]"""
    )
    context.close()
    ARTIFACTS.mkdir(exist_ok=True)
    measured = {"first_contentful_paint_ms": round(first_paint_ms), "first_chart_ms": round(first_chart_ms)}
    (ARTIFACTS / "paint-times.json").write_text(json.dumps(measured, indent=2) + "\n")
    print(f"pyramid page: {measured}")  # noqa: T201 - the numbers the issue asks to report
    assert plotly_bytes < 1_500_000  # the basic bundle, not the 4.8 MB full one
    assert first_paint_ms < first_chart_ms  # the numbers paint before plotly.js arrives
    assert first_paint_ms < PAINT_BUDGET_MS
    assert first_chart_ms < CHART_BUDGET_MS


@pytest.mark.parametrize("viewport", [1280, 390], indirect=True)
def test_a_charts_toolbar_stays_above_its_data(page, live_server, lived_in, login, viewport):  # noqa: ANN001
    login("manager")
    org = BudgetNode.objects.get(path="lumen-lab")
    page.goto(f"{live_server.url}/budgets/delivery/main/{org.pk}/")
    for chart in ("chart-delivery", "chart-causes"):
        page.wait_for_selector(f"#{chart} .main-svg")
        page.hover(f"#{chart} .nsewdrag")  # Plotly shows its toolbar while the pointer is on the chart
        toolbar = page.locator(f"#{chart} .modebar").bounding_box()
        plot_area = page.locator(f"#{chart} .nsewdrag").bounding_box()
        assert toolbar["y"] + toolbar["height"] <= plot_area["y"], chart
