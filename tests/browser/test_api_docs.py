"""The interactive API docs are served locally (no CDN) and render the budget endpoints."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_api_docs_render_the_budget_endpoints_without_console_errors(
    page, live_server, demo_data, login, console_errors
):  # noqa: ANN001
    login("researcher")
    page.goto(f"{live_server.url}/api/docs/")

    page.wait_for_selector("text=/api/v1/budget-nodes/tree/")
    assert console_errors == []
