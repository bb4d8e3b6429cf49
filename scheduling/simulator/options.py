"""The simulator's command-line options for what owners do (``manage.py simulate``,
``python -m scheduling.simulator``, ``benchmarks.outcomes``): resubmitting ended work."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from scheduling.simulator.engine import DEFAULT_RESUBMIT_DELAY_S


def add_resubmit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--resubmit-delay-s`` and ``--no-resubmit`` (the simulator's command lines)."""
    group = parser.add_argument_group("owners")
    group.add_argument(
        "--resubmit-delay-s",
        type=float,
        default=DEFAULT_RESUBMIT_DELAY_S,
        help="non-resumable work ended by a preemption or a node failure is submitted again this "
        "long after, with its full duration (default %(default)s)",
    )
    group.add_argument("--no-resubmit", action="store_true", help="ended work stays ended")


def resubmit_delay(options: Mapping[str, object]) -> float | None:
    """The run's resubmission delay from parsed options (None: no resubmission)."""
    if options.get("no_resubmit"):
        return None
    delay = options.get("resubmit_delay_s")
    return DEFAULT_RESUBMIT_DELAY_S if delay is None else float(delay)  # type: ignore[arg-type]
