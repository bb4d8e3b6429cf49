"""How results look: aligned tables for people, JSON for scripts, durations and times in short words."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime

import click

DURATION = re.compile(r"^(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s?)?$")
UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def seconds_from(text: str) -> int:
    """``"90"``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"``, ``"1d"`` -> seconds; ValueError otherwise."""
    match = DURATION.match(text.strip().lower())
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 2h, 1h30m)")
    return sum(int(value) * UNIT_S[unit] for unit, value in match.groupdict().items() if value)


def duration(seconds: float | None) -> str:
    """``3725`` -> ``"1h02m"``; under a minute in seconds; None -> ``"-"``."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def moment(iso: str | None) -> str:
    """An ISO time from the API in the local time zone, e.g. ``"Dec 02 14:20"``; None -> ``"-"``."""
    if not iso:
        return "-"
    return datetime.fromisoformat(iso).astimezone().strftime("%b %d %H:%M")


def number(value: float | str | None, places: int = 1) -> str:
    if value is None:
        return "-"
    return f"{float(value):,.{places}f}"


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f}%"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, empty: str = "(none)") -> None:
    """Columns padded to their widest cell; the last column is left to run on (sentences)."""
    if not rows:
        click.echo(empty)
        return
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in cells)) for i in range(len(headers))]
    for line in [list(headers), *cells]:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        click.echo("  ".join([*padded, line[-1]]).rstrip())


def as_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def pairs(items: Sequence[tuple[str, object]]) -> None:
    """``label: value`` lines with the values aligned."""
    width = max(len(label) for label, _ in items)
    for label, value in items:
        click.echo(f"{label + ':':<{width + 1}} {value}")
