"""Profile figures: stacked step-time breakdown per step, and one step's timeline (bars on a time axis)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from board.data.profile import BREAKDOWN_PARTS, StepBreakdown, Timeline

PART_COLORS = {"data": "#e15759", "forward": "#4e79a7", "backward": "#f28e2b", "optimizer": "#59a14f",
               "log": "#b07aa1", "other": "#bab0ac", "step": "#d3d7dc", "user": "#76b7b2"}
_LAYOUT = {"template": "plotly_white", "margin": {"l": 70, "r": 20, "t": 40, "b": 40}}


def breakdown_figure(breakdown: StepBreakdown, title: str = "step time") -> go.Figure:
    figure = go.Figure()
    steps = breakdown.steps.tolist()
    for part in BREAKDOWN_PARTS:
        values = breakdown.parts_ms[part]
        figure.add_bar(x=steps, y=values.tolist(), name=part, marker_color=PART_COLORS[part],
                       hovertemplate=f"step %{{x}}<br>{part}: %{{y:.3f}} ms<extra></extra>")
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
                       base=timeline.start_ms[rows].tolist(), orientation="h", name=kind,
                       marker={"color": PART_COLORS.get(kind, "#9c755f"), "line": {"width": 0.5, "color": "#fff"}},
                       customdata=hover, hovertemplate="%{customdata}<br>start %{base:.3f} ms, %{x:.3f} ms<extra></extra>")
    figure.update_layout(barmode="overlay", title=f"step {timeline.step} timeline", xaxis_title="ms from step start",
                         height=140 + 40 * max(len(timeline.lanes), 1), dragmode="zoom",
                         yaxis={"categoryorder": "array", "categoryarray": list(reversed(timeline.lanes)),
                                "fixedrange": True}, legend={"orientation": "h", "y": -0.3}, **_LAYOUT)
    return figure
