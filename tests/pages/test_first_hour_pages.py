"""The pyramid's occupancy card, the queue's pages and the compressed Plotly bundle."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from portal.metrics import period_bounds
from portal.models import ClusterHour
from scheduling.models import AllocationHour, Workload
from tests.pages.conftest import client_for


def test_the_occupancy_card_is_the_charts_definition_over_its_period(history, frozen_now):
    client = client_for(history.oscar)
    api = client.get("/api/v1/pyramid/main/?days=7").json()
    start, end = period_bounds(now=frozen_now, days=7)
    hours = {"cluster": history.main, "hour__gte": start, "hour__lt": end}
    healthy = ClusterHour.objects.filter(**hours).aggregate(s=Sum("healthy_gpu_s"))["s"]
    used = AllocationHour.objects.filter(**hours).aggregate(s=Sum("used_gpu_s"))["s"]
    assert api["period"]["occupancy"] == pytest.approx(used / healthy)
    page = client.get("/metrics/main/?days=7").content.decode()
    assert f'(7 days)</div><div class="value">{api["period"]["occupancy"] * 100:.1f}%' in page
    assert f"now {api['now']['occupancy'] * 100:.1f}%" in page


def test_the_queue_pages_its_rows_and_keeps_the_filter(history, frozen_now):
    template = Workload.objects.filter(cluster=history.main, state="pending").order_by("id").first()
    for _ in range(10):  # newly submitted: no reason yet, so last in scheduling order
        template.pk = None
        template.save()
    client = client_for(history.bob)
    pending = client.get("/api/v1/queue/main/").json()["results"]
    first = client.get("/scheduling/queue/main/").content.decode()
    assert len(pending) > 25, "the seeded queue is long enough to page"
    assert first.count("<tr data-workload=") == 25
    assert 'rel="next" href="?page=2"' in first
    second = client.get("/scheduling/queue/main/?page=2").content.decode()
    assert f'data-workload="{pending[25]["id"]}"' in second
    assert "Rows 26–" in second and 'rel="prev"' in second
    filtered = client.get("/scheduling/queue/main/?class=batch&page=1").content.decode()
    assert "page=2" not in filtered or "class=batch&amp;page=2" in filtered


def test_plotly_is_served_compressed(client):
    brotli = client.get("/static/plotly/plotly-basic.min.js", HTTP_ACCEPT_ENCODING="br, gzip")
    gzip = client.get("/static/plotly/plotly-basic.min.js", HTTP_ACCEPT_ENCODING="gzip")
    assert brotli["Content-Encoding"] == "br" and gzip["Content-Encoding"] == "gzip"
    assert int(brotli["Content-Length"]) < 400_000  # of 1.2 MB


def test_the_favicon_is_found(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
