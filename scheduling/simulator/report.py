"""A self-contained HTML report (plotly.js inline, no network): one or more policies side by side.

Three figures: delivered/owed per team, occupancy over time, and wait distributions per class
(boxes from precomputed quantiles, whiskers at p5 and p95, so the file stays small).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from scheduling.simulator.metrics import percentile
from scheduling.simulator.result import SimulationResult

COLOURS = {"fairshare": "#1b7837", "priority": "#b2182b", "fifo": "#2166ac"}
SUMMARY_ROWS = (
    ("delivered_owed_ratio", "delivered / owed"),
    ("teams_at_95pct", "teams at >= 95%"),
    ("jain_index", "Jain index (delivered/owed)"),
    ("availability", "availability"),
    ("occupancy", "occupancy"),
    ("unallocated_share", "unallocated share"),
    ("utilization", "utilization"),
    ("wait_p50_s", "wait p50 (s)"),
    ("wait_p90_s", "wait p90 (s)"),
    ("preemptions", "preemptions"),
    ("lost_gpu_hours", "GPU-hours lost to preemption"),
    ("node_failure_lost_gpu_hours", "GPU-hours lost to node failures"),
    ("jobs", "jobs"),
    ("jobs_completed", "jobs completed in the period"),
    ("funded_jobs_completed", "funded jobs completed in the period"),
    ("goodput_gpu_hours", "goodput GPU-hours (completed or kept)"),
    ("preemptions_per_1000_gpu_hours", "preemptions per 1,000 GPU-hours"),
    ("resubmissions", "resubmissions of ended work"),
    ("funded_debug_interactive_wait_p90_s", "funded debug + interactive wait p90 (s)"),
    ("occupancy_when_contended", "occupancy while work waits for GPUs"),
    ("sim_wall_s", "simulation wall time (s)"),
)


# The outcome rows the text table (cli.side_by_side) shows after its own.
SIDE_BY_SIDE_KEYS = (
    "jobs_completed",
    "funded_jobs_completed",
    "goodput_gpu_hours",
    "node_failure_lost_gpu_hours",
    "preemptions_per_1000_gpu_hours",
    "resubmissions",
    "funded_debug_interactive_wait_p90_s",
    "occupancy_when_contended",
)


def render_html(results: Sequence[SimulationResult], title: str = "Simulation report") -> str:
    figures = [_delivery(results), _occupancy(results), _waits(results), _size_waits(results)]
    body = "\n".join(figure.to_html(full_html=False, include_plotlyjs=False) for figure in figures)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><script>{get_plotlyjs()}</script>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}th:first-child{text-align:left}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>{_summary_table(results)}{body}</body></html>"
    )


def _summary_table(results: Sequence[SimulationResult]) -> str:
    head = "".join(f"<th>{html.escape(str(result.summary['policy']))}</th>" for result in results)
    rows = []
    for key, label in SUMMARY_ROWS:
        cells = "".join(f"<td>{html.escape(str(result.summary.get(key)))}</td>" for result in results)
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def _delivery(results: Sequence[SimulationResult]) -> go.Figure:
    figure = go.Figure()
    for result in results:
        policy = str(result.summary["policy"])
        figure.add_bar(
            name=policy,
            x=[row["allocation"] for row in result.per_team],
            y=[row["delivered_owed_ratio"] for row in result.per_team],
            marker_color=COLOURS.get(policy),
        )
    figure.add_hline(y=0.95, line_dash="dot", annotation_text="95%")
    figure.update_layout(
        title="Delivered / owed GPU-hours per team", barmode="group", yaxis_title="delivered / owed"
    )
    return figure


def _occupancy(results: Sequence[SimulationResult]) -> go.Figure:
    figure = go.Figure()
    for result in results:
        policy = str(result.summary["policy"])
        hours = [row["hour"] / 24 for row in result.hourly]
        assigned = [_share(row["funded"] + row["unfunded"], row["healthy"]) for row in result.hourly]
        unfunded = [_share(row["unfunded"], row["healthy"]) for row in result.hourly]
        colour = COLOURS.get(policy)
        figure.add_scatter(x=hours, y=assigned, name=f"{policy}: occupancy", line_color=colour)
        figure.add_scatter(
            x=hours, y=unfunded, name=f"{policy}: unfunded", line={"color": colour, "dash": "dot"}
        )
    figure.update_layout(
        title="Occupancy over time (hourly; dotted: the part running unfunded work)",
        xaxis_title="day of the measured period",
        yaxis_title="share of healthy GPUs",
    )
    return figure


def _waits(results: Sequence[SimulationResult]) -> go.Figure:
    return _wait_boxes(results, lambda result: result.waits_by_class, "class", lambda name: name)


def _size_waits(results: Sequence[SimulationResult]) -> go.Figure:
    return _wait_boxes(results, lambda result: result.waits_by_size, "size band", lambda band: f"{band} GPUs")


def _wait_boxes(
    results: Sequence[SimulationResult],
    groups: Callable[[SimulationResult], Mapping[str, list[float]]],
    what: str,
    label: Callable[[str], str],
) -> go.Figure:
    """Waits per group (``groups`` of each result: class or size band), one box set per policy."""
    figure = go.Figure()
    for result in results:
        policy = str(result.summary["policy"])
        waits = groups(result)
        stats = [_quantiles(waits[name]) for name in waits]
        figure.add_box(
            name=policy,
            x=[label(name) for name in waits],
            q1=[s[1] for s in stats],
            median=[s[2] for s in stats],
            q3=[s[3] for s in stats],
            lowerfence=[s[0] for s in stats],
            upperfence=[s[4] for s in stats],
            marker_color=COLOURS.get(policy),
        )
    figure.update_layout(
        title=f"Wait from submit (or resubmit) to start, per {what} (box: p25-p75, line: median, whiskers: p5 and p95)",
        boxmode="group",
        yaxis_type="log",
        yaxis_title="seconds (+1)",
    )
    return figure


def _quantiles(values: list[float]) -> list[float]:
    return [(percentile(values, q) or 0.0) + 1.0 for q in (0.05, 0.25, 0.5, 0.75, 0.95)]


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None
