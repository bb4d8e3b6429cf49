"""Plotly figures as ``<div>`` snippets. Pages load ``plotly/plotly.min.js`` once, from static.

Every chart shares one look (fonts, margins, legend under the plot) so it reads well at 1280 px
and at 390 px; ``responsive`` lets Plotly resize with its container.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import plotly.graph_objects as go
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#2457c5", "#15803d", "#b45309", "#7c3aed", "#b91c1c", "#0e7490", "#64748b")
CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


def figure_div(figure: go.Figure, *, div_id: str, height: int = 320) -> SafeString:
    """The figure as a div (no script tag for plotly.js itself)."""
    figure.update_layout(
        height=height,
        margin={"l": 48, "r": 12, "t": 12, "b": 40},
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        legend={"orientation": "h", "y": -0.18, "x": 0},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="#fff",
        hovermode="x unified",
        colorway=PALETTE,
    )
    figure.update_xaxes(gridcolor="#eef0f4")
    figure.update_yaxes(gridcolor="#eef0f4", rangemode="tozero")
    html = figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG)
    return mark_safe(f'<div class="chart">{html}</div>')  # noqa: S308 - Plotly's own markup


def line_chart(
    *,
    div_id: str,
    x: Sequence[datetime],
    series: dict[str, Sequence[float]],
    y_title: str,
    dashed: Sequence[str] = (),
    stacked: Sequence[str] = (),
    height: int = 320,
) -> SafeString:
    """Lines over time; names in ``dashed`` are drawn dashed (reference lines like entitlement),
    names in ``stacked`` are filled and stacked (parts of a whole)."""
    figure = go.Figure()
    for name, values in series.items():
        figure.add_trace(_trace(name, x, values, dashed=name in dashed, stacked=name in stacked))
    figure.update_yaxes(title_text=y_title)
    return figure_div(figure, div_id=div_id, height=height)


def _trace(
    name: str, x: Sequence[datetime], values: Sequence[float], *, dashed: bool, stacked: bool
) -> go.Scatter:
    line = {"width": 2, "dash": "dash" if dashed else "solid"}
    if stacked:
        return go.Scatter(x=list(x), y=list(values), name=name, mode="lines", line=line, stackgroup="one")
    return go.Scatter(x=list(x), y=list(values), name=name, mode="lines", line=line)


def bar_chart(
    *, div_id: str, labels: Sequence[str], values: Sequence[float], x_title: str, height: int = 260
) -> SafeString:
    """Horizontal bars, largest first as given (for "where did the time go")."""
    figure = go.Figure(go.Bar(x=list(values), y=list(labels), orientation="h", marker_color=PALETTE[0]))
    figure.update_layout(hovermode="closest")
    figure.update_xaxes(title_text=x_title, rangemode="tozero")
    figure.update_yaxes(autorange="reversed", automargin=True)
    return figure_div(figure, div_id=div_id, height=height)
