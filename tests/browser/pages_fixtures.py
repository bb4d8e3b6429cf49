"""Browser fixtures for the persona pages: the demo organisation plus weeks of history."""

from __future__ import annotations

import pytest
from django.utils import timezone

from portal.demo_history import history_seed
from scheduling.models import Cluster


@pytest.fixture
def demo_history(demo_data: None) -> None:
    """load_demo, then 14 days of rollups and a live queue per cluster; "researcher" owns work in it."""
    now = timezone.now()
    for cluster in Cluster.objects.order_by("name"):
        history_seed(cluster=cluster, now=now, days=14, users=["researcher"])
