"""Plotly figures as ``<div>`` snippets. Pages load ``plotly/plotly.min.js`` once, from static.

Figures are plain Plotly dicts rendered by ``plotly.io.to_html(validate=False)``: building
``graph_objects`` validates every property and cost more than the page's queries. Every chart
shares one look (fonts, margins, legend under the plot) so it reads well at 1280 px and at 390 px;
``responsive`` (and static/portal/charts.js) fit it to its card.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import plotly.io as pio
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#2457c5", "#15803d", "#b45309", "#7c3aed", "#b91c1c", "#0e7490", "#64748b")
CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
GRID = "#eef0f4"
JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})  # no "</script>" inside


def figure_div(data: list[dict], layout: dict, *, div_id: str, height: int = 320) -> SafeString:
    """The figure as an empty div and a JSON data block that ``charts.js`` draws with ``Plotly.newPlot``."""
    base = {
        "height": height,
        "margin": {"l": 48, "r": 12, "t": 12, "b": 40},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "legend": {"orientation": "h", "y": -0.18, "x": 0},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#fff",
        "hovermode": "x unified",
        "colorway": list(PALETTE),
        "xaxis": {"gridcolor": GRID},
        "yaxis": {"gridcolor": GRID, "rangemode": "tozero"},
    }
    for key in ("xaxis", "yaxis"):
        base[key] |= layout.pop(key, {})
    figure = {"data": data, "layout": base | layout, "config": CONFIG}
    # No inline script (the Content-Security-Policy allows none): the figure travels as a JSON data
    # block that static/portal/charts.js draws with Plotly.newPlot, on load and after htmx swaps.
    payload = pio.to_json(figure, validate=False).translate(JSON_IN_HTML)
    return mark_safe(  # noqa: S308 - the id is ours and the JSON is escaped for an HTML data block
        f'<div class="chart"><div id="{div_id}" class="plotly-graph-div"></div>'
        f'<script type="application/json" data-plotly-figure="{div_id}">{payload}</script></div>'
    )


def empty_chart() -> SafeString:
    """What a chart says before the rollups hold any history for its period."""
    return mark_safe(
        '<p class="muted chart-empty">No history for this period yet: it fills in as the scheduler runs '
        "(a fresh demo can seed some with <code>manage.py load_demo_history</code>).</p>"
    )


def _iso(moments: Sequence[datetime]) -> list[str]:
    return [moment.isoformat() for moment in moments]


def line_chart(
    *,
    div_id: str,
    x: Sequence[datetime],
    series: Mapping[str, Sequence[float | None]],
    y_title: str,
    dashed: Sequence[str] = (),
    stacked: Sequence[str] = (),
    colors: dict[str, str] | None = None,
    height: int = 320,
) -> SafeString:
    """Lines over time; names in ``dashed`` are drawn dashed (reference lines like entitlement),
    names in ``stacked`` are filled and stacked (parts of a whole); ``colors`` pins a line's colour
    (e.g. a class's p50 and p90 alike)."""
    if not x:
        return empty_chart()
    times = _iso(x)
    data = []
    for name, values in series.items():
        trace: dict[str, Any] = {"type": "scatter", "mode": "lines", "name": name, "x": times, "y": list(values),
                 "line": {"width": 2, "dash": "dash" if name in dashed else "solid"}}  # fmt: skip
        if name in stacked:
            trace["stackgroup"] = "one"
        if colors and name in colors:
            trace["line"]["color"] = colors[name]
        data.append(trace)
    return figure_div(data, {"yaxis": {"title": {"text": y_title}}}, div_id=div_id, height=height)


def bar_chart(
    *, div_id: str, labels: Sequence[str], values: Sequence[float], x_title: str, height: int = 260
) -> SafeString:
    """Horizontal bars in the order given, first on top (for "where did the time go")."""
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "x": list(values),
            "y": list(labels),
            "marker": {"color": PALETTE[0]},
        }
    ]
    layout = {
        "hovermode": "closest",
        "xaxis": {"title": {"text": x_title}, "rangemode": "tozero"},
        "yaxis": {"autorange": "reversed", "automargin": True},
    }
    return figure_div(data, layout, div_id=div_id, height=height)
