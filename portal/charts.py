"""Plotly figures as ``<div>`` snippets: an empty graph div and the figure as a JSON data block.

Pages load plotly.js (the vendored "basic" bundle, static/plotly/) and static/portal/charts.js
with ``defer``: the page's numbers paint first, then charts.js draws every figure it finds. No
inline script runs, so nothing waits for the 1.2 MB bundle before the page shows. Figures are
plain Plotly dicts (building ``graph_objects`` validates every property and cost more than the
page's queries). Every chart shares one look (fonts, margins, legend under the plot) so it reads
well at 1280 px and at 390 px; charts.js fits it to its card. The toolbar shows on hover only,
above the plot area, so it never covers the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.utils.html import format_html, json_script
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#2457c5", "#15803d", "#b45309", "#7c3aed", "#b91c1c", "#0e7490", "#64748b")
CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": ["lasso2d", "select2d", "autoScale2d", "zoomIn2d", "zoomOut2d"],
}
GRID = "#eef0f4"


def figure_div(data: list[dict], layout: dict, *, div_id: str, height: int = 320) -> SafeString:
    """The figure's graph div and its JSON (``data-chart``), which static/portal/charts.js draws."""
    base = {
        "height": height,
        # The top margin keeps Plotly's toolbar (top right) above the plot area, off the data.
        "margin": {"l": 48, "r": 12, "t": 30, "b": 40},
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
    return format_html(
        '<div class="chart"><div id="{}" class="plotly-graph-div" style="height:{}px" data-chart></div>{}</div>',
        div_id,
        height,
        json_script(figure, f"{div_id}-figure"),
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
