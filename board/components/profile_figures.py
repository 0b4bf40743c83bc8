"""Profile figures: stacked step-time breakdown per step, and one step's timeline (bars on a time axis)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from board.data.profile import BREAKDOWN_PARTS, PART_LABELS, MemoryCurve, StepBreakdown, Timeline
from instrumentation.format.units import format_bytes

PART_COLORS = {"data": "#e15759", "forward": "#4e79a7", "backward": "#f28e2b", "optimizer": "#59a14f",
               "comm_wait": "#edc948", "log": "#b07aa1", "other": "#bab0ac", "step": "#d3d7dc", "user": "#76b7b2"}
MARK_COLOR = "#d62728"  # the step an alert (or a click) points at
_LAYOUT = {"template": "plotly_white", "margin": {"l": 70, "r": 20, "t": 40, "b": 40}}


def breakdown_figure(breakdown: StepBreakdown, title: str = "step time", marked_step: int | None = None,
                     window: tuple[int, int] | None = None) -> go.Figure:
    """Stacked parts per step; ``marked_step`` (an alert's step) outlined, ``window`` (its steps) shaded."""
    figure = go.Figure()
    steps = breakdown.steps.tolist()
    for part in BREAKDOWN_PARTS:
        values = breakdown.parts_ms[part]
        if part == "comm_wait" and not values.any():  # single-process training never waits on other ranks
            continue
        label = PART_LABELS.get(part, part)
        figure.add_bar(x=steps, y=values.tolist(), name=label, marker_color=PART_COLORS[part],
                       hovertemplate=f"step %{{x}}<br>{label}: %{{y:.3f}} ms<extra></extra>")
    if breakdown.gpu_busy_ms is not None:  # device time: how much of each step the GPU ran kernels
        for name, values, color in (("GPU busy", breakdown.gpu_busy_ms, "#1b9e77"),
                                    ("GPU idle", breakdown.gpu_idle_ms, "#7f7f7f")):
            figure.add_scatter(x=steps, y=values.tolist(), name=name, mode="lines+markers",
                               line={"color": color, "dash": "dot" if name == "GPU idle" else "solid"},
                               hovertemplate=f"step %{{x}}<br>{name}: %{{y:.3f}} ms<extra></extra>")
    figure.update_layout(barmode="stack", title=title, xaxis_title="step", yaxis_title="ms", height=320,
                         legend={"orientation": "h", "y": -0.25}, **_LAYOUT)
    if not steps:
        figure.add_annotation(text="this capture has no step spans", showarrow=False, xref="paper", yref="paper",
                              x=0.5, y=0.5)
    if window is not None and steps:
        first, last = max(window[0], steps[0]), min(window[1], steps[-1])
        if first <= last:
            figure.add_vrect(x0=first - 0.5, x1=last + 0.5, fillcolor=MARK_COLOR, opacity=0.08, line_width=0,
                             layer="below")
    if marked_step is not None and marked_step in steps:
        figure.add_vrect(x0=marked_step - 0.5, x1=marked_step + 0.5, line={"color": MARK_COLOR, "width": 2},
                         fillcolor="rgba(0,0,0,0)", name="marked step")
        figure.add_annotation(x=marked_step, y=1.0, yref="paper", yanchor="bottom", text=f"alert · step {marked_step}",
                              showarrow=False, font={"color": MARK_COLOR})
    return figure


def memory_figure(curve: MemoryCurve, title: str = "memory allocated") -> go.Figure:
    """Allocated bytes at each memory sample, the steps shaded in turn; nothing before the first sample or after the
    last. With a sample per allocation and free (torch's [memory] events) a step line (the value holds until the
    next event); with sampled counters, markers joined by a faint dotted line (between samples nothing was measured)."""
    figure = go.Figure()
    for i, (start, end, step) in enumerate(zip(curve.step_start_ms.tolist(), curve.step_end_ms.tolist(),
                                               curve.steps.tolist())):
        figure.add_vrect(x0=start, x1=end, fillcolor="#4e79a7", opacity=0.06 if i % 2 else 0.12, line_width=0,
                         layer="below", annotation_text=f"step {step}", annotation_position="top left",
                         annotation_font={"size": 10, "color": "#666"})
    hover = [format_bytes(int(b)) for b in curve.allocated_bytes.tolist()]
    line = {"shape": "hv", "color": "#4e79a7", "width": 1.5} if curve.every_change else \
        {"color": "rgba(78,121,167,0.35)", "width": 1, "dash": "dot"}
    figure.add_scatter(x=curve.time_ms.tolist(), y=curve.allocated_bytes.tolist(), mode="lines+markers", line=line,
                       marker={"size": 3 if curve.every_change else 6, "color": "#4e79a7"}, name="allocated",
                       customdata=hover,
                       hovertemplate="%{x:.3f} ms<br>allocated %{customdata}<extra></extra>")
    figure.update_layout(title=title, xaxis_title="ms from the capture's start", yaxis_title="bytes allocated",
                         height=300, showlegend=False, **_LAYOUT)
    figure.update_yaxes(rangemode="tozero")
    return figure


def timeline_figure(timeline: Timeline) -> go.Figure:
    """One horizontal-bar trace per colour (phase or span kind); lanes top to bottom as ``timeline.lanes``."""
    figure = go.Figure()
    lane_names = np.array(timeline.lanes, dtype=object)
    kinds = np.array(timeline.kind, dtype=object)
    names = np.array(timeline.name, dtype=object)
    details = np.array(timeline.detail, dtype=object)
    for kind in dict.fromkeys(timeline.kind):
        rows = np.flatnonzero(kinds == kind)
        hover = [f"{n}<br>{d}" if d else str(n) for n, d in zip(names[rows], details[rows])]
        figure.add_bar(y=lane_names[timeline.lane[rows]].tolist(), x=timeline.duration_ms[rows].tolist(),
                       base=timeline.start_ms[rows].tolist(), orientation="h", name=PART_LABELS.get(kind, kind),
                       marker={"color": PART_COLORS.get(kind, "#9c755f"), "line": {"width": 0.5, "color": "#fff"}},
                       customdata=hover,
                       hovertemplate="%{customdata}<br>start %{base:.3f} ms, %{x:.3f} ms<extra></extra>")
    figure.update_layout(barmode="overlay", title=f"step {timeline.step} timeline", xaxis_title="ms from step start",
                         height=140 + 40 * max(len(timeline.lanes), 1), dragmode="zoom",
                         yaxis={"categoryorder": "array", "categoryarray": list(reversed(timeline.lanes)),
                                "fixedrange": True}, legend={"orientation": "h", "y": -0.3}, **_LAYOUT)
    return figure
