"""Give a fresh demo weeks of history so the pages have something to show (portal.demo_history)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from portal.demo_history import history_seed
from portal.models import ClusterHour
from scheduling.models import Cluster


class Command(BaseCommand):
    help = (
        "Seed the rollups with plausible history for every cluster (only the hours before the live "
        "scheduler's first rollup), and a queue on clusters without workloads. Safe to run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=30)

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        for cluster in Cluster.objects.order_by("name"):
            before = ClusterHour.objects.filter(cluster=cluster).count()
            history_seed(cluster=cluster, now=timezone.now(), days=days)
            added = ClusterHour.objects.filter(cluster=cluster).count() - before
            self.stdout.write(f"{cluster.slug}: {added} hours of history seeded before the live rollups")
