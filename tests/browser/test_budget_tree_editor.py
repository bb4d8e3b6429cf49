"""The manager edits a budget in the tree editor in a real browser, at desktop and phone widths."""

from __future__ import annotations

import re

import pytest

from budgets.models import Allocation, BudgetChange, BudgetNode

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open_node(page, live_server, path: str) -> BudgetNode:  # noqa: ANN001
    node = BudgetNode.objects.get(path=path)
    page.goto(f"{live_server.url}/budgets/main/")
    page.click(f"#node-row-{node.pk} a.node-link")
    page.wait_for_selector(f".panel-inner[data-node-id='{node.pk}']")
    return node


@pytest.mark.parametrize("viewport", [1280, 390], indirect=True)
def test_the_manager_changes_an_allocation_and_sees_the_value_and_the_history_entry(
    page, live_server, demo_data, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("manager")
    node = _open_node(page, live_server, "lumen-lab/language/pretraining")
    url_before = page.url

    page.fill("#id_gpus", "123")
    page.fill("#id_reason", "Base 70B run moves up a quarter")
    page.click(".allocation-form button[type=submit]")

    page.wait_for_selector("#node-history li.change-gpus >> text=Base 70B run moves up a quarter")
    assert page.text_content("#panel-gpus").split()[0] == "123"
    assert page.text_content(f"#node-row-{node.pk} td.gpus").strip() == "123"
    assert re.search(r"→\s*123\s*GPUs", page.text_content("#node-history li.change-gpus"))
    assert page.url == url_before, "the change happened without a page load"
    assert Allocation.objects.get(node=node, cluster__slug="main").gpus == 123
    screenshot(f"budget-tree-editor-{viewport}")
    assert console_errors == []


@pytest.mark.parametrize("viewport", [1280, 390], indirect=True)
def test_bad_input_shows_field_errors_and_changes_nothing(
    page, live_server, demo_data, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("manager")
    node = _open_node(page, live_server, "lumen-lab/language/evaluation")
    before = Allocation.objects.get(node=node, cluster__slug="main").gpus

    page.fill("#id_gpus", "-5")
    page.fill("#id_reason", "")
    page.click(".allocation-form button[type=submit]")

    page.wait_for_selector("#id_gpus-errors")
    assert "cannot be negative" in page.text_content("#id_gpus-errors")
    assert "why" in page.text_content("#id_reason-errors")
    assert Allocation.objects.get(node=node, cluster__slug="main").gpus == before
    assert not BudgetChange.objects.filter(node=node, field="gpus", actor__username="manager").exists()
    screenshot(f"budget-tree-editor-errors-{viewport}")
    assert console_errors == []


def test_a_researcher_sees_the_tree_without_edit_controls(
    page, live_server, demo_data, login, console_errors
):  # noqa: ANN001
    login("researcher")
    _open_node(page, live_server, "lumen-lab/language/pretraining")

    assert page.locator(".allocation-form").count() == 0
    assert page.locator(".readonly-note").is_visible()
    assert console_errors == []
