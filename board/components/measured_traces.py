"""A measured series as Plotly traces: markers at its steps, a solid line only between adjacent measured steps, a
faint dotted connector (no hover, no legend entry) across the steps that were not measured."""
from __future__ import annotations

from typing import Any

import numpy as np


def _split_at_gaps(x: np.ndarray, y: list[float | None], gap_before: np.ndarray
                   ) -> tuple[list[float | None], list[float | None], bool]:
    """x and y with a None before each point that has steps not measured before it (Plotly breaks the line there);
    whether there was any."""
    gaps = np.flatnonzero(np.asarray(gap_before[1:], bool))  # a gap before point i + 1: break after point i
    if not len(gaps):
        return x.tolist(), y, False
    xs: list[float | None] = []
    ys: list[float | None] = []
    begin = 0
    for gap in gaps.tolist():
        xs += [*x[begin:gap + 1].tolist(), None]
        ys += [*y[begin:gap + 1], None]
        begin = gap + 1
    return xs + x[begin:].tolist(), ys + y[begin:], True


def series_traces(name: str, x: np.ndarray, values: np.ndarray, color: str, hover: str,
                  gap_before: np.ndarray | None = None) -> list[dict[str, Any]]:
    """A measured series: markers at its steps and a solid line between adjacent steps; across steps not measured
    only a faint dotted connector (hover off, no legend entry). ``gap_before``: per point, whether steps before it
    were not measured (a view's ``unmeasured_before``, exact under display downsampling); default: x more than one
    step after the point before."""
    x = np.asarray(x)
    if gap_before is None:
        gap_before = np.r_[False, np.diff(x) > 1]
    y = [None if not np.isfinite(v) else float(v) for v in values]
    xs, ys, gapped = _split_at_gaps(x, y, gap_before)
    traces = []
    if gapped:
        traces.append({"type": "scatter", "mode": "lines", "name": f"{name} (not measured between)",
                       "x": np.asarray(x).tolist(), "y": y, "legendgroup": name, "showlegend": False,
                       "hoverinfo": "skip", "connectgaps": True, "opacity": 0.35,
                       "line": {"color": color, "width": 1, "dash": "dot"}})
    traces.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": xs, "y": ys, "legendgroup": name,
                   "line": {"color": color, "width": 1.4}, "marker": {"size": 4, "color": color},
                   "hovertemplate": hover})
    return traces
