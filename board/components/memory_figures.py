"""Memory figures: the allocator timeline with category bands, the leak evidence curve, the module treemap."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.data.memory import MemoryTimeline, Treemap
from instrumentation.format import alert_names as names
from instrumentation.format.memory_categories import (ACTIVATION, GRADIENT, INPUT, OPTIMIZER_STATE, PARAMETER,
                                                      TEMPORARY)
from instrumentation.format.tags import MEMORY
from instrumentation.format.units import bytes_axis, format_bytes

CATEGORY_COLORS = {PARAMETER: "#4e79a7", GRADIENT: "#f28e2b", OPTIMIZER_STATE: "#b07aa1", ACTIVATION: "#59a14f",
                   TEMPORARY: "#edc948", INPUT: "#76b7b2"}


def timeline_figure(timeline: MemoryTimeline, title: str) -> dict[str, Any]:
    steps = timeline.steps.tolist()
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": category, "x": steps, "y": values.tolist(), "stackgroup": "bands",
         "line": {"width": 0.5, "color": CATEGORY_COLORS.get(category, "#999")}, "customdata": _iec(values),
         "hovertemplate": f"{category}<br>step %{{x}}: %{{customdata}}<extra>at peak</extra>"}
        for category, values in timeline.bands.items()
    ]
    data.append({"type": "scatter", "mode": "lines", "name": "peak", "x": steps, "y": timeline.peak.tolist(),
                 "line": {"color": "#c0392b", "width": 1.5}, "customdata": _iec(timeline.peak),
                 "hovertemplate": "peak<br>step %{x}: %{customdata}<extra></extra>"})
    data.append({"type": "scatter", "mode": "lines", "name": "allocated", "x": steps, "y": timeline.allocated.tolist(),
                 "line": {"color": "#222", "width": 1.5, "dash": "dot"}, "customdata": _iec(timeline.allocated),
                 "hovertemplate": "allocated at step end<br>step %{x}: %{customdata}<extra></extra>"})
    if timeline.reserved is not None:  # a device pool: what it holds from the device, allocated or not
        data.append({"type": "scatter", "mode": "lines", "name": "reserved", "x": steps,
                     "y": timeline.reserved.tolist(), "line": {"color": "#7f7f7f", "width": 1.5, "dash": "dash"},
                     "customdata": _iec(timeline.reserved),
                     "hovertemplate": "reserved by the pool<br>step %{x}: %{customdata}<extra></extra>"})
    reserved = timeline.reserved if timeline.reserved is not None else np.zeros(0)
    highest = max([float(np.max(timeline.peak)) if len(timeline.peak) else 0.0,
                   float(np.max(timeline.allocated)) if len(timeline.allocated) else 0.0,
                   float(np.max(reserved)) if len(reserved) else 0.0])
    figure = _layout(data, title, "step", highest, annotations=[] if steps else [_note(f"no {MEMORY} scalars yet")])
    figure["layout"]["uirevision"] = title  # live updates keep the user's zoom
    return figure


def leak_evidence_figure(evidence: dict[str, Any], title: str) -> dict[str, Any]:
    """Live bytes at each step end of the window and the Theil–Sen line through them (slope = bytes/step)."""
    steps = [float(s) for s in evidence.get(names.STEPS, [])]
    values = [float(v) for v in evidence.get(names.LIVE_BYTES, evidence.get(names.RSS_BYTES, []))]
    data: list[dict[str, Any]] = [{"type": "scatter", "mode": "lines+markers", "name": "live bytes", "x": steps,
                                   "y": values, "marker": {"size": 4}, "line": {"color": "#4e79a7"},
                                   "customdata": _iec(values), "hovertemplate": "step %{x}: %{customdata}<extra></extra>"}]
    if steps and values:
        slope = float(evidence.get(names.BYTES_PER_STEP, 0.0))
        x, y = np.asarray(steps), np.asarray(values)
        intercept = float(np.median(y - slope * x))
        data.append({"type": "scatter", "mode": "lines", "name": f"trend {format_bytes(slope)}/step", "x": [steps[0], steps[-1]],
                     "y": [intercept + slope * steps[0], intercept + slope * steps[-1]],
                     "line": {"color": "#c0392b", "dash": "dash"}})
    figure = _layout(data, title, "step", max(values, default=0.0))
    figure["layout"]["height"] = 260
    return figure


def treemap_figure(treemap: Treemap, title: str) -> dict[str, Any]:
    return {"data": [{"type": "treemap", "ids": treemap.ids, "labels": treemap.labels, "parents": treemap.parents,
                      "values": treemap.values, "branchvalues": "total", "text": _iec(treemap.values),
                      "hovertemplate": "%{id}<br>%{text}<extra></extra>", "textinfo": "label+text"}],
            "layout": {"title": {"text": title, "font": {"size": 13}, "x": 0.01}, "height": 380,
                       "margin": {"l": 5, "r": 5, "t": 30, "b": 5}}}


def _iec(values: Any) -> list[str]:
    return [format_bytes(v) for v in np.asarray(values, dtype=np.float64).tolist()]


def _layout(data: list[dict[str, Any]], title: str, x_title: str, highest_bytes: float,
            annotations: list | None = None) -> dict[str, Any]:
    return {"data": data, "layout": {
        "title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"}, "height": 340,
        "margin": {"l": 60, "r": 10, "t": 30, "b": 70}, "hovermode": "x unified", "plot_bgcolor": "#fff",
        "xaxis": {"title": {"text": x_title, "standoff": 4}}, "yaxis": bytes_axis(highest_bytes),
        "legend": {"orientation": "h", "y": -0.25, "yanchor": "top", "font": {"size": 10}},
        "annotations": annotations or []}}


def _note(text: str) -> dict[str, Any]:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}
