"""Memory figures: the allocator timeline with category bands, the leak evidence curve, the module treemap."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from board.data.memory import AlertMark, MemoryTimeline, SnapshotMark, Treemap
from instrumentation.format import alert_names as names
from instrumentation.format.alert_names import FRAGMENTATION, LEAK, OOM
from instrumentation.format.memory_categories import (ACTIVATION, GRADIENT, INPUT, OPTIMIZER_STATE, PARAMETER,
                                                      TEMPORARY)
from instrumentation.format.memory_snapshot import EVALUATION, TRAINING
from instrumentation.format.tags import MEMORY
from instrumentation.format.units import bytes_axis, format_bytes

CATEGORY_COLORS = {PARAMETER: "#4e79a7", GRADIENT: "#f28e2b", OPTIMIZER_STATE: "#b07aa1", ACTIVATION: "#59a14f",
                   TEMPORARY: "#edc948", INPUT: "#76b7b2"}
PHASE_WORDS = {EVALUATION: "evaluation (gradients off)", TRAINING: "training"}
ALERT_COLORS = {OOM: "#c0392b", LEAK: "#e67e22", FRAGMENTATION: "#7f8c8d"}


def timeline_figure(timeline: MemoryTimeline, title: str, snapshots: Sequence[SnapshotMark] = (),
                    alerts: Sequence[AlertMark] = (), focus: str | None = None, focus_step: int | None = None
                    ) -> dict[str, Any]:
    """The allocator timeline: category bands at each step's peak, the peak and allocated lines, the reserved bytes
    of a pool, the limit (from each step it was logged at), the snapshots at their step and bytes, and the memory
    alerts (a leak's window shaded, an OOM's step as a line). A thinned log (``timeline.unmeasured_before``) is drawn
    as markers at the logged steps with a faint dotted line between them, the bands as bars at those steps: nothing
    solid across steps that were not logged. ``focus``: the capture id of the snapshot (and its alert) the page was
    opened with, drawn stronger; ``focus_step``: a step to mark (an alert's)."""
    steps = timeline.steps.tolist()
    thinned = timeline.unmeasured_before is not None and bool(np.any(timeline.unmeasured_before))
    data: list[dict[str, Any]] = []
    for category, values in timeline.bands.items():
        band: dict[str, Any] = {"name": category, "x": steps, "y": values.tolist(), "customdata": _iec(values),
                                "hovertemplate": f"{category}<br>step %{{x}}: %{{customdata}}<extra>at peak</extra>"}
        color = CATEGORY_COLORS.get(category, "#999")
        if thinned:  # one bar per logged step (width: that step), stacked
            band.update({"type": "bar", "width": 1, "marker": {"color": color, "line": {"width": 0}}})
        else:
            band.update({"type": "scatter", "mode": "lines", "stackgroup": "bands", "line": {"width": 0.5,
                                                                                             "color": color}})
        data.append(band)
    data += _measured_line(timeline, "peak", timeline.peak, {"color": "#c0392b", "width": 1.5},
                           "peak (highest since the previous logged step)" if thinned else "peak")
    data += _measured_line(timeline, "allocated", timeline.allocated, {"color": "#222", "width": 1.5, "dash": "dot"},
                           "allocated at step end")
    if timeline.reserved is not None:  # a device pool: what it holds from the device, allocated or not
        data += _measured_line(timeline, "reserved", timeline.reserved,
                               {"color": "#7f7f7f", "width": 1.5, "dash": "dash"}, "reserved by the pool")
    limit = _limit_trace(timeline)
    if limit is not None:
        data.append(limit)
    shapes, annotations = _alert_shapes(alerts, focus, focus_step)
    if snapshots:
        data.append(_snapshot_trace(snapshots, focus))
    reserved = timeline.reserved if timeline.reserved is not None else np.zeros(0)
    limits = [v for v in (limit or {}).get("y", []) if v is not None]
    highest = max([float(np.max(timeline.peak)) if len(timeline.peak) else 0.0,
                   float(np.max(timeline.allocated)) if len(timeline.allocated) else 0.0,
                   float(np.max(reserved)) if len(reserved) else 0.0, *limits,
                   *[float(s.allocated_bytes) for s in snapshots]])
    if not steps:
        annotations.append(_note(f"no {MEMORY} scalars yet"))
    figure = _layout(data, title, "step", highest, annotations=annotations)
    figure["layout"]["shapes"] = shapes
    figure["layout"]["barmode"] = "stack"
    figure["layout"]["uirevision"] = title  # live updates keep the user's zoom
    return figure


def _measured_line(timeline: MemoryTimeline, name: str, values: np.ndarray, line: dict[str, Any],
                   hover: str) -> list[dict[str, Any]]:
    """A series as a line between consecutive logged steps, markers at each logged step of a thinned log and a
    faint dotted connector (no hover, no legend entry) across the steps that were not logged."""
    steps = timeline.steps.tolist()
    trace = {"type": "scatter", "mode": "lines", "name": name, "x": steps, "y": values.tolist(), "line": line,
             "legendgroup": name, "customdata": _iec(values),
             "hovertemplate": f"{hover}<br>step %{{x}}: %{{customdata}}<extra></extra>"}
    unmeasured = timeline.unmeasured_before
    if unmeasured is None or not np.any(unmeasured):
        return [trace]
    solid_y: list[float | None] = values.astype(np.float64).tolist()
    x: list[float | None] = list(steps)
    for index in reversed(np.flatnonzero(unmeasured).tolist()):  # a break (None) before each point after a gap
        x.insert(index, None)
        solid_y.insert(index, None)
    trace.update({"x": x, "y": solid_y, "mode": "lines+markers", "connectgaps": False,
                  "marker": {"size": 5, "color": line["color"]},
                  "customdata": [None if v is None else format_bytes(v) for v in solid_y]})
    connector = {"type": "scatter", "mode": "lines", "name": f"{name} (not logged between)", "x": steps,
                 "y": values.tolist(), "legendgroup": name, "showlegend": False, "hoverinfo": "skip",
                 "line": {"color": line["color"], "width": 1, "dash": "dot"}, "opacity": 0.35}
    return [connector, trace]


def _limit_trace(timeline: MemoryTimeline) -> dict[str, Any] | None:
    """The allocator limit as a step line from each step it was logged at to the next (to the chart's last step);
    None without a limit logged, a gap where it was removed (NaN)."""
    if timeline.limit_steps is None or timeline.limit is None or not np.any(np.isfinite(timeline.limit)):
        return None
    x = [float(s) for s in timeline.limit_steps]
    y: list[float | None] = [float(v) if np.isfinite(v) else None for v in timeline.limit]
    last = max([*x, *(float(s) for s in timeline.steps[-1:])])
    if last > x[-1]:
        x.append(last)
        y.append(y[-1])
    return {"type": "scatter", "mode": "lines", "name": "limit", "x": x, "y": y, "line": {"color": "#8e44ad",
            "width": 2, "dash": "dashdot", "shape": "hv"}, "connectgaps": False,
            "customdata": [None if v is None else format_bytes(v) for v in y],
            "hovertemplate": "allocator limit<br>from step %{x}: %{customdata}<extra></extra>"}


def _snapshot_trace(snapshots: Sequence[SnapshotMark], focus: str | None) -> dict[str, Any]:
    """Each snapshot as a diamond at its step and allocated bytes, one taken in an evaluation labelled so; the focused
    one larger and outlined."""
    return {"type": "scatter", "mode": "markers+text", "name": "snapshots", "x": [s.step for s in snapshots],
            "y": [s.allocated_bytes for s in snapshots], "textposition": "middle left", "textfont": {"size": 10},
            "text": ["evaluation " if s.phase == EVALUATION else "" for s in snapshots],  # not a training step
            "marker": {"symbol": "diamond", "size": [14 if s.capture_id == focus else 9 for s in snapshots],
                       "color": "#f1c40f", "line": {"color": "#000", "width": [2 if s.capture_id == focus else 1
                                                                                  for s in snapshots]}},
            "customdata": [[s.capture_id, snapshot_label(s), format_bytes(s.allocated_bytes)] for s in snapshots],
            "hovertemplate": "snapshot %{customdata[0]} · %{customdata[1]}<br>step %{x}: %{customdata[2]}"
                             "<extra></extra>"}


def snapshot_label(snapshot: SnapshotMark) -> str:
    """The reason and, when known, the phase of a snapshot: "peak · evaluation (gradients off)"."""
    phase = PHASE_WORDS.get(snapshot.phase, "")
    return f"{snapshot.reason} · {phase}" if phase else snapshot.reason


def _alert_shapes(alerts: Sequence[AlertMark], focus: str | None, focus_step: int | None
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A leak's window as a shaded x-range and its step as a line; an OOM's (or fragmentation's) step as a line; the
    alert of the focused snapshot drawn stronger. Each shape is named ("<kind>-window", "<kind>-step")."""
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for mark in alerts:
        strong = focus is not None and mark.snapshot == focus
        color = ALERT_COLORS.get(mark.kind, "#c0392b")
        if mark.first_step is not None and mark.last_step is not None and mark.last_step > mark.first_step:
            shapes.append({"type": "rect", "name": f"{mark.kind}-window", "xref": "x", "yref": "paper",
                           "x0": mark.first_step, "x1": mark.last_step, "y0": 0, "y1": 1, "layer": "below",
                           "fillcolor": color, "opacity": 0.18 if strong else 0.08, "line": {"width": 0}})
        shapes.append({"type": "line", "name": f"{mark.kind}-step", "xref": "x", "yref": "paper", "x0": mark.step,
                       "x1": mark.step, "y0": 0, "y1": 1,
                       "line": {"color": color, "width": 2.5 if strong else 1.2, "dash": "solid" if strong else "dot"}})
        annotations.append({"text": mark.label, "x": mark.step, "xref": "x", "y": 1, "yref": "paper",
                            "showarrow": False, "xanchor": "right", "yanchor": "top", "textangle": -90,
                            "font": {"size": 10, "color": color}})
    if focus_step is not None and not any(mark.step == focus_step for mark in alerts):
        shapes.append({"type": "line", "name": "focus-step", "xref": "x", "yref": "paper", "x0": focus_step,
                       "x1": focus_step, "y0": 0, "y1": 1, "line": {"color": "#000", "width": 1.5}})
    return shapes, annotations


def leak_evidence_figure(evidence: dict[str, Any], title: str) -> dict[str, Any]:
    """Live bytes at each step end of the window and the Theil–Sen line through them (slope = bytes/step)."""
    steps = [float(s) for s in evidence.get(names.STEPS, [])]
    values = [float(v) for v in evidence.get(names.LIVE_BYTES, evidence.get(names.RSS_BYTES, []))]
    data: list[dict[str, Any]] = [{"type": "scatter", "mode": "lines+markers", "name": "live bytes", "x": steps,
                                   "y": values, "marker": {"size": 4}, "line": {"color": "#4e79a7"},
                                   "customdata": _iec(values),
                                   "hovertemplate": "step %{x}: %{customdata}<extra></extra>"}]
    if steps and values:
        slope = float(evidence.get(names.BYTES_PER_STEP, 0.0))
        x, y = np.asarray(steps), np.asarray(values)
        intercept = float(np.median(y - slope * x))
        data.append({"type": "scatter", "mode": "lines", "name": f"trend {format_bytes(slope)}/step",
                     "x": [steps[0], steps[-1]], "y": [intercept + slope * steps[0], intercept + slope * steps[-1]],
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
