"""A researcher acts from the pages: cancels a job in the queue, resubmits one from a start option,
downloads the queue, delivery and waits as CSV; a manager finds a node in the tree and folds it.

The small lab of tests/scheduling (bob researches in lab/vision/perception; password "pw"), on a
cluster dave's work fills but for 4 GPUs of one node: bob's 8-GPU job waits, "with 4 GPUs" starts.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from django.utils import timezone

from scheduling.models import Cluster, Workload, WorkloadState
from scheduling.passes import run_pass
from scheduling.services import workload_submit
from tests.scheduling.conftest import build_lab

pytestmark = pytest.mark.browser
BOTH = pytest.mark.parametrize("viewport", [1280, 390], indirect=True)


@pytest.fixture
def lab(transactional_db, settings):  # noqa: ANN001, ANN201
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from django.core.cache import cache

    cache.clear()
    built = build_lab()
    # a 32-GPU cluster: the lane for short work (1 GPU) would hold back the 4-GPU start option
    # this test resubmits with, which fills the last free GPUs (as in tests/pages/conftest.py)
    Cluster.objects.filter(pk=built.main.pk).update(short_lane_fraction=0.0, rebalance_hysteresis=0.0)
    built.main.refresh_from_db()
    for gpus in (8, 8, 8, 4):  # protected for 4 h: nothing of dave's can be preempted now
        workload_submit(actor=built.dave, cluster=built.main, allocation_path="lab/language", gpus=gpus,
                        min_runtime_s=4 * 3600, metadata={"duration_s": 86400})  # fmt: skip
    run_pass(cluster_id=built.main.pk, now=timezone.now())
    built.big = _submit(built, "train-big", 8)
    built.extra = _submit(built, "sweep-extra", 8)
    run_pass(cluster_id=built.main.pk, now=timezone.now())
    return built


def _submit(lab, name: str, gpus: int) -> Workload:  # noqa: ANN001
    return workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=gpus,
                           min_runtime_s=3600, resumable=True, name=name).workload  # fmt: skip


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _download(page, selector: str, tmp_path: Path) -> list[dict]:  # noqa: ANN001
    with page.expect_download() as download:
        page.click(selector)
    target = tmp_path / download.value.suggested_filename
    download.value.save_as(target)
    return _rows(target)


@BOTH
def test_a_researcher_cancels_a_job_in_the_queue_and_resubmits_one_from_a_start_option(
    page, live_server, lab, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    page.on("dialog", lambda dialog: dialog.accept())  # the confirms (hx-confirm)
    login("bob", "pw")
    page.goto(f"{live_server.url}/scheduling/queue/main/")
    assert page.locator(f"tr[data-workload='{lab.extra.pk}'] [data-action=cancel]").is_visible()
    screenshot(f"actions-queue-{viewport}")
    page.click(f"tr[data-workload='{lab.extra.pk}'] [data-action=cancel]")
    page.wait_for_selector(f"tr[data-workload='{lab.extra.pk}']", state="detached")  # the rows re-read
    assert Workload.objects.get(pk=lab.extra.pk).state == WorkloadState.CANCELLED

    page.goto(f"{live_server.url}/scheduling/workloads/{lab.big.pk}/")
    option = page.locator("#options li", has_text="With 4 GPUs")
    option.wait_for()
    assert option.get_attribute("data-starts") == "yes"
    screenshot(f"actions-why-pending-{viewport}")
    option.locator("[data-resubmit]").click()
    page.wait_for_url(lambda url: f"/workloads/{lab.big.pk}/" not in url)
    new = Workload.objects.get(metadata__resubmitted_from=lab.big.pk)
    assert page.url.endswith(f"/scheduling/workloads/{new.pk}/")
    assert (new.gpus, new.owner, new.allocation.path, new.resumable) == (
        4,
        lab.bob,
        "lab/vision/perception",
        True,
    )
    assert Workload.objects.get(pk=lab.big.pk).state == WorkloadState.CANCELLED
    assert f"Workload {new.pk} submitted with 4 GPUs; workload {lab.big.pk} cancelled." in page.text_content(
        ".messages"
    )
    page.click("#status [data-action=hold]")
    page.wait_for_selector("#status [data-action=release]")
    assert page.text_content("#action-notice") == "Held: it will not start until released."
    page.wait_for_selector("#options >> text=It is held: release it to let it start.")  # re-read on the event
    screenshot(f"actions-after-resubmit-{viewport}")
    assert console_errors == []


def test_someone_without_rights_sees_no_buttons(page, live_server, lab, login, console_errors):  # noqa: ANN001
    login("charlie", "pw")  # a viewer of lab
    page.goto(f"{live_server.url}/scheduling/workloads/{lab.big.pk}/")
    page.locator("#options h2").wait_for()
    assert page.locator("[data-action], [data-resubmit]").count() == 0
    page.goto(f"{live_server.url}/scheduling/queue/main/")
    assert page.locator("#queue-rows tr[data-workload]").count() == 2
    assert page.locator("[data-action]").count() == 0
    assert console_errors == []


def test_csv_downloads_open_with_the_pages_rows(page, live_server, lab, login, console_errors, tmp_path):  # noqa: ANN001
    login("alice", "pw")
    page.goto(f"{live_server.url}/scheduling/queue/main/?user=bob")
    queue = _download(page, "#queue-rows [data-export=csv]", tmp_path)
    assert [int(row["id"]) for row in queue] == [lab.big.pk, lab.extra.pk] or \
        [int(row["id"]) for row in queue] == [lab.extra.pk, lab.big.pk]  # fmt: skip
    order = [
        int(r)
        for r in page.locator("#queue-rows tr[data-workload]").evaluate_all(
            "rs => rs.map(r => r.dataset.workload)"
        )
    ]
    assert [int(row["id"]) for row in queue] == order
    assert {row["user"] for row in queue} == {"bob"}

    page.goto(f"{live_server.url}/budgets/delivery/main/{lab.vision.pk}/?days=7")
    delivery = _download(page, "#children [data-export=csv]", tmp_path)
    assert [(row["level"], row["path"]) for row in delivery] == [
        ("node", "lab/vision"),
        ("child", "lab/vision/perception"),
    ]
    assert float(delivery[0]["allocation_gpus"]) == 16.0

    page.goto(f"{live_server.url}/metrics/main/waits/?days=7")
    waits = _download(page, "[data-export=csv]", tmp_path)
    assert [(row["workload_class"], row["starts"]) for row in waits] == [("batch", "4")]
    assert console_errors == []


@BOTH
def test_the_tree_finds_a_node_and_folds_a_subtree_and_the_panel_links_to_delivery(
    page, live_server, lab, login, console_errors, screenshot, viewport
):  # noqa: ANN001
    login("alice", "pw")
    page.goto(f"{live_server.url}/budgets/main/")
    row = {
        path: page.locator(f"tr[data-path='{path}']")
        for path in ("lab", "lab/vision", "lab/vision/perception", "lab/language")
    }
    page.fill("#tree-search", "perc")
    assert [row[p].is_visible() for p in row] == [True, True, True, False]
    assert page.text_content("#tree-search-count") == "3 of 5 nodes shown"
    screenshot(f"tree-search-{viewport}")
    page.fill("#tree-search", "")
    row["lab/vision"].locator("button.fold").click()
    assert not row["lab/vision/perception"].is_visible() and row["lab/language"].is_visible()
    row["lab/vision"].locator("button.fold").click()
    assert row["lab/vision/perception"].is_visible()
    row["lab/vision/perception"].locator("a.node-link").click()
    page.locator("[data-delivery-link]").click()
    page.wait_for_url(f"**/budgets/delivery/main/{lab.perception.pk}/")
    assert console_errors == []
