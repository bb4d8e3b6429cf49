"""The bell in a real browser: a manager is told when their team falls under 95% of owed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from budgets.models import BudgetNode
from notifications.models import Notification
from notifications.tasks import check_under_owed
from scheduling.models import AllocationHour, Cluster
from tests.scheduling.processes import wait_for
from tests.workers import unique_queue, worker_running

pytestmark = [pytest.mark.browser, pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def test_a_manager_sees_in_the_bell_that_their_team_fell_under_95_percent(
    page, live_server, demo_data, login, console_errors, screenshot, settings
):  # noqa: ANN001
    pretraining = BudgetNode.objects.get(path="lumen-lab/language/pretraining")
    main = Cluster.objects.get(slug="main")
    now = timezone.now()
    for hours_ago in range(1, 25):  # the last day: 80 of every 100 owed GPU-hours delivered
        AllocationHour.objects.create(cluster=main, allocation=pretraining, hour=now - timedelta(hours=hours_ago),
                                      owed_gpu_s=100 * 3600, delivered_gpu_s=80 * 3600)  # fmt: skip
    login("manager")
    page.wait_for_selector("#bell")
    assert page.locator("#bell-count").count() == 0
    # the bell is drawn, not an emoji that shows as an empty box where no emoji font is installed
    drawn = page.locator("#bell svg").bounding_box()
    assert drawn is not None and drawn["width"] >= 14 and drawn["height"] >= 14
    queue = unique_queue("bell")
    settings.NOTIFICATIONS_QUEUE = queue
    with worker_running(queue, NOTIFICATIONS_QUEUE=queue) as worker:
        check_under_owed.apply_async(queue=queue)  # what beat runs every hour
        wait_for(lambda: Notification.objects.filter(user__username="manager").exists(), timeout=60,
                 what="the manager's notification", process=worker)  # fmt: skip
    page.reload()
    page.wait_for_selector("#bell-count")
    assert page.text_content("#bell-count").strip() == "1"
    page.click("#bell")
    item = page.locator("#notifications li.unread")
    assert "lumen-lab/language/pretraining got 80% of what it was owed on main" in item.text_content()
    assert "was delivered 1,840 of the 2,300 GPU-hours it was owed (80.0%" in item.text_content()
    screenshot("notifications-bell-1280")
    page.click("#mark-all-read")
    page.wait_for_selector("#bell")
    assert page.locator("#bell-count").count() == 0
    assert page.locator("#notifications li.read").count() == 1
    assert console_errors == []
