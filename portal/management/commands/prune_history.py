"""Drop raw pass and utilisation rows the rollups already hold, once older than the retention period."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from portal.retention import Pruned, history_prune


class Command(BaseCommand):
    help = (
        "Delete scheduling passes that decided nothing and utilisation samples that are older than "
        "--days (default HISTORY_RETENTION_DAYS) and already folded into the hourly rollups. "
        "Workloads, runs, decisions and rollups are kept. Beat runs the same every day."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None, help="keep this many days (at least 1)")
        parser.add_argument("--dry-run", action="store_true", help="count what would go, delete nothing")

    def handle(self, *args: Any, days: int | None, dry_run: bool, **options: Any) -> None:
        keep = settings.HISTORY_RETENTION_DAYS if days is None else days
        if keep < 1:
            raise CommandError(f"--days must be at least 1 (got {keep})")
        verb = "would delete" if dry_run else "deleted"

        def report(result: Pruned) -> None:
            self.stdout.write(
                f"{result.cluster}: {verb} {result.passes} passes, {result.samples} utilisation samples"
            )

        pruned = history_prune(now=timezone.now(), keep_days=keep, dry_run=dry_run, progress=report)
        passes, samples = sum(p.passes for p in pruned), sum(p.samples for p in pruned)
        self.stdout.write(f"{verb} {passes} passes and {samples} samples older than {keep} days in all")
