"""Inline help: ``{% term "owed" %}`` renders the word with its glossary meaning on hover and focus."""

from __future__ import annotations

import math
from decimal import Decimal

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.glossary import term as glossary_term
from scheduling import wording

register = template.Library()


@register.simple_tag
def term(slug: str, label: str = "") -> SafeString:
    """The word (or ``label``) linked to its glossary entry, its meaning as the tooltip."""
    entry = glossary_term(slug)
    return format_html(
        '<a class="term" href="{}#{}" title="{}" data-term="{}">{}</a>',
        reverse("glossary"),
        entry.slug,
        entry.meaning,
        entry.slug,
        label or entry.word,
    )


def _number(value: object) -> float | None:
    """A finite float, or None for what is not one (None, "", a string, NaN, infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@register.filter
def pct(value: object, digits: int = 1) -> str:
    """0.9731 -> "97.3%"; None, or anything that is not a finite number -> an em dash (no data is not 0%)."""
    number = _number(value)
    return "—" if number is None else f"{number * 100:.{digits}f}%"


@register.filter
def num(value: object, digits: int = 1) -> str:
    number = _number(value)
    return "—" if number is None else f"{number:,.{digits}f}"


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as the largest two units a person reads at a glance: 45 s, 12 min, 3 h 20 min, 2 d 4 h."""
    number = _number(seconds)
    if number is None:
        return "—"
    seconds = max(number, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def td_seconds(value) -> float:  # noqa: ANN001 - a timedelta
    return value.total_seconds()


@register.filter
def reason_name(code: str | None) -> str:
    """A pending-reason code as its plain name; templates put the code itself in a tooltip."""
    return wording.reason_name(code)


@register.filter
def unknown_start(code: str | None) -> str:
    """Why a pending workload with this reason has no estimated start, in words."""
    return wording.unknown_start(code)


@register.filter
def grouped_decisions(decisions: list) -> list[wording.DecisionGroup]:
    return wording.group_decisions(decisions)
