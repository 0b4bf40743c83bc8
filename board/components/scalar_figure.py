"""Scalar chart: one raw (faint when smoothing), one smoothed and one non-finite-marker trace per run."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.components.colors import run_color, with_alpha
from board.data.views import ScalarView, XAxis

FEW_POINTS = 30  # series this short are drawn with markers too
TRACES_PER_RUN = 3  # raw, smoothed, non-finite markers: run k owns traces 3k .. 3k+2
X_TITLES = {"step": "step", "relative": "relative time (s)", "wall": "wall time (UTC)"}
_NONFINITE_Y = {"nan": 0.5, "inf": 0.97, "-inf": 0.03}  # on the overlay axis y2, in [0, 1]


def display_x(x: np.ndarray, x_axis: XAxis) -> list[Any]:
    """x values as Plotly takes them: numbers, or UTC date strings for the wall-time axis."""
    if x_axis == "wall":
        return (np.asarray(x, np.float64) * 1000).astype("datetime64[ms]").astype(str).tolist()
    return np.asarray(x).tolist()


def nonfinite_kind(values: np.ndarray) -> list[str]:
    return ["nan" if np.isnan(v) else ("inf" if v > 0 else "-inf") for v in values.tolist()]


def run_traces(view: ScalarView, x_axis: XAxis, smoothing: bool) -> list[dict[str, Any]]:
    """The three traces of one run, as lists (not typed arrays) so live updates can extend them."""
    color = run_color(view.run)
    kinds = nonfinite_kind(view.nonfinite_values)
    return [
        {
            "type": "scatter",
            "mode": "lines+markers" if len(view.x) <= FEW_POINTS else "lines",  # a lone point stays visible
            "marker": {"color": color, "size": 6},
            "name": view.run,
            "legendgroup": view.run,
            "showlegend": not smoothing,
            "x": display_x(view.x, x_axis),
            "y": view.raw.tolist(),
            "line": {"color": with_alpha(color, 0.25) if smoothing else color, "width": 1},
            "hovertemplate": f"{view.run}<br>%{{x}}: %{{y:.6g}}<extra>raw</extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": view.run,
            "legendgroup": view.run,
            "showlegend": smoothing,
            "x": display_x(view.x, x_axis) if smoothing else [],
            "y": view.smoothed.tolist() if smoothing and view.smoothed is not None else [],
            "line": {"color": color, "width": 1.8},
            "hovertemplate": f"{view.run}<br>%{{x}}: %{{y:.6g}}<extra>smoothed</extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": f"{view.run} non-finite",
            "legendgroup": view.run,
            "showlegend": False,
            "yaxis": "y2",
            "x": display_x(view.nonfinite_x, x_axis),
            "y": [_NONFINITE_Y[k] for k in kinds],
            "text": kinds,
            "marker": {"symbol": "x", "size": 9, "color": color, "line": {"width": 2, "color": "#cc0000"}},
            "hovertemplate": f"{view.run}<br>%{{x}}: %{{text}}<extra>non-finite</extra>",
        },
    ]


def scalar_figure(tag: str, views: list[ScalarView], *, x_axis: XAxis, log_y: bool, smoothing: bool) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    for view in views:
        data.extend(run_traces(view, x_axis, smoothing))
    return {
        "data": data,
        "layout": {
            "title": {"text": tag, "font": {"size": 13}, "x": 0.01, "xanchor": "left"},
            "height": 320,
            "margin": {"l": 55, "r": 10, "t": 30, "b": 75},
            "uirevision": f"{tag}|{x_axis}|{log_y}",
            "hovermode": "closest",
            "showlegend": True,
            "legend": {"orientation": "h", "y": -0.3, "yanchor": "top", "font": {"size": 10}},
            "xaxis": {"title": {"text": X_TITLES[x_axis], "standoff": 4}, "type": "date" if x_axis == "wall" else "linear"},
            "yaxis": {"type": "log" if log_y else "linear", "exponentformat": "e"},
            "yaxis2": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
            "plot_bgcolor": "#fff",
            "annotations": [] if views else [_empty_note("no run matches the filter")],
        },
    }


def _empty_note(text: str) -> dict[str, Any]:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}
