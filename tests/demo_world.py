"""The demo organisation as a user meets it: loaded, with history, after a few real passes."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from django.core.management import call_command
from django.utils import timezone

from portal.demo_history import history_seed
from scheduling.models import Cluster
from scheduling.passes import run_pass


def demo_lived_in(*, days: int, passes: int) -> datetime:
    """``load_demo``, ``days`` of history for every cluster, then ``passes`` passes 10 s apart; the start."""
    with open(os.devnull, "w") as quiet:
        call_command("load_demo", stdout=quiet)
    now = timezone.now()
    for cluster in Cluster.objects.order_by("name"):
        history_seed(cluster=cluster, now=now, days=days, users=["researcher"])
        for step in range(passes):
            run_pass(cluster_id=cluster.pk, now=now + timedelta(seconds=10 * step))
    return now
