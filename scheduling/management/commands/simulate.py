"""``python manage.py simulate``: replay a month of a cluster under one or more policies.

Thin entry point: arguments and output live in ``scheduling.simulator.cli``; the simulation is
``scheduling.simulator.run_simulation``. No database is used.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.simulator import SimulationError, cli
from scheduling.simulator.traces import TraceError


class Command(BaseCommand):
    help = "Simulate the scheduler on an Ai2-like scenario or a CSV trace, and compare policies."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cli.policies(str(options["policy"]))
            inputs = cli.build_input(options, out=self.stderr)
            # _out: the stream OutputWrapper wraps (no added line ends: the progress bar redraws with \r)
            results = cli.run_policies(inputs, options, err=self.stderr._out)  # type: ignore[arg-type]  # django-stubs type _out through __getattr__; it is the wrapped TextIO
        except (TraceError, SimulationError, ValueError, OSError) as error:
            raise CommandError(str(error)) from error
        cli.write_outputs(results, options, self.stdout._out)  # type: ignore[arg-type]  # as above: the wrapped TextIO
