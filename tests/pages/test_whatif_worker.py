"""A what-if from the form to its result through a real Celery worker on Redis (marker ``celery``)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from portal.demo_history import history_seed
from portal.models import WhatIfRun
from tests.pages.conftest import client_for
from tests.scheduling.processes import wait_for
from tests.workers import unique_queue, worker_running

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def test_a_posted_what_if_runs_on_the_worker_and_its_page_stops_polling_when_done(lab, settings):
    history_seed(cluster=lab.main, now=timezone.now(), days=8, users=["bob"])  # the worker's clock is real
    history = lab
    queue = unique_queue("whatif")
    settings.WHATIF_QUEUE = queue
    client = client_for(history.alice)
    with worker_running(queue, WHATIF_QUEUE=queue) as worker:
        response = client.post("/budgets/whatif/main/", {"days": "7", f"budget-{history.language.pk}": "0"})
        assert response.status_code == 302
        run = WhatIfRun.objects.get()
        wait_for(lambda: WhatIfRun.objects.get(pk=run.pk).status in ("done", "failed"), timeout=120,
                 what="the replay to finish", process=worker)  # fmt: skip
    run.refresh_from_db()
    assert run.status == "done", run.error
    text = client.get(response["Location"], headers={"HX-Request": "true"}).content.decode()
    assert 'data-status="done"' in text and "hx-trigger" not in text and "Delivered GPU-h" in text
    assert run.result["replayed"]["synthesized"] > 0
