"""Scalar chart: one raw (faint when smoothing), one smoothed and one non-finite-marker trace per run, in the run's
style; a hover label listing every run at the hovered step sorted by value; unit axes (IEC bytes, SI times) from the
tag's suffix. A series with steps not measured (logged at an interval, thinned) gets markers at its points, no line
across those steps but a faint dotted connector (a fourth trace), and its legend says the interval."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.components.colors import run_style, with_alpha
from board.data.views import ScalarView, XAxis
from instrumentation.format.units import TagUnit, tag_unit, unit_ticks

FEW_POINTS = 30  # series this short are drawn with markers too
TRACES_PER_RUN = 4  # raw, smoothed, non-finite markers, faint connector: run k owns traces 4k .. 4k+3
_TIME_SUFFIX = {1e-9: "ns", 1e-6: "µs", 1e-3: "ms", 1.0: "s"}
X_TITLES = {"step": "step", "relative": "relative time (s)", "wall": "wall time (UTC)"}
_NONFINITE_Y = {"nan": 0.5, "inf": 0.97, "-inf": 0.03}  # on the overlay axis y2, in [0, 1]
CONSTANT_SPAN = 1e-12  # a y span this small relative to the values is a constant series: drawn around its value
CONSTANT_PAD = 0.1  # a constant's axis spans its value ± this share of it (± 1 around 0)


def display_x(x: np.ndarray, x_axis: XAxis) -> list[Any]:
    """x values as Plotly takes them: numbers, or UTC date strings for the wall-time axis."""
    if x_axis == "wall":
        return (np.asarray(x, np.float64) * 1000).astype("datetime64[ms]").astype(str).tolist()
    return np.asarray(x).tolist()


def _trace_x(x: np.ndarray, x_axis: XAxis) -> np.ndarray | list[str]:
    """x as a NumPy array (serialized at C speed, also inside a page's layout) but for the wall-time axis's dates."""
    return display_x(x, x_axis) if x_axis == "wall" else np.asarray(x)


def display_values(values: np.ndarray) -> np.ndarray:
    """Finite values as they go to the browser: float32 when that is exact (a `simple_value` always is), so the JSON
    writes the float32's shortest decimal (~9 digits, which names that float32 exactly) instead of 17 digits;
    float64 otherwise. The API and the CSV keep serving every value as stored."""
    with np.errstate(over="ignore"):
        narrow = values.astype(np.float32)
    return narrow if np.array_equal(narrow, values) else values


def nonfinite_kind(values: np.ndarray) -> list[str]:
    return ["nan" if np.isnan(v) else ("inf" if v > 0 else "-inf") for v in values.tolist()]


def _broken(values: np.ndarray | list, breaks: np.ndarray) -> np.ndarray | list:
    """`values` with a None before each index in `breaks` (Plotly ends the line there); as is when there is none."""
    if not len(breaks) or not len(values):
        return values
    pieces = np.split(np.arange(len(values)), breaks)
    out: list = []
    for index, piece in enumerate(pieces):
        out += ([None] if index else []) + [values[i] for i in piece.tolist()]
    return out


def run_traces(view: ScalarView, x_axis: XAxis, smoothing: bool) -> list[dict[str, Any]]:
    """The four traces of one run. y values are NumPy arrays (written as JSON lists, not typed arrays, so live updates
    can extend them); a thinned series' values are lists with a None at each stretch of unmeasured steps."""
    style = run_style(view.run)
    color = style.color
    unit = tag_unit(view.tag)
    suffix = "" if unit is None else (" B" if unit.kind == "bytes" else " " + _TIME_SUFFIX[unit.size])
    kinds = nonfinite_kind(view.nonfinite_values)
    raw, x = display_values(view.raw), _trace_x(view.x, x_axis)
    smoothed = view.smoothed.astype(raw.dtype) if smoothing and view.smoothed is not None else []
    breaks = np.flatnonzero(view.unmeasured_before[1:]) + 1  # a point after steps nobody measured: no line to it
    markers = len(view.x) <= FEW_POINTS or view.sampling is not None  # a lone point, and every measured one, visible
    name = view.run if view.sampling is None else f"{view.run} · {view.sampling}"
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers" if markers else "lines",
            "marker": {"color": with_alpha(color, 0.35) if smoothing else color, "size": 6, "symbol": style.symbol},
            "name": name,
            "legendgroup": view.run,
            "showlegend": not smoothing,
            "x": _broken(x, breaks),
            "y": _broken(raw, breaks),
            "line": {"color": with_alpha(color, 0.25) if smoothing else color, "width": 1, "dash": style.dash},
            "hovertemplate": f"%{{y:.6g}}{suffix}<extra>{view.run}</extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers" if smoothing and view.sampling is not None else "lines",
            "marker": {"color": color, "size": 6, "symbol": style.symbol},
            "name": name,
            "legendgroup": view.run,
            "showlegend": smoothing,
            "x": _broken(x, breaks) if smoothing else [],
            "y": _broken(smoothed, breaks),
            "customdata": _broken(raw, breaks) if smoothing else [],
            "line": {"color": color, "width": 1.8, "dash": style.dash},
            "hovertemplate": f"%{{y:.6g}}{suffix} (raw %{{customdata:.6g}})<extra>{view.run}</extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": f"{view.run} non-finite",
            "legendgroup": view.run,
            "showlegend": False,
            "yaxis": "y2",
            "x": _trace_x(view.nonfinite_x, x_axis),
            "y": [_NONFINITE_Y[k] for k in kinds],
            "text": kinds,
            "marker": {"symbol": "x", "size": 9, "color": color, "line": {"width": 2, "color": "#cc0000"}},
            "hovertemplate": f"%{{text}}<extra>{view.run}</extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{view.run} (not measured between)",
            "legendgroup": view.run,
            "showlegend": False,
            "hoverinfo": "skip",
            "x": x if len(breaks) else [],
            "y": (smoothed if smoothing else raw) if len(breaks) else [],
            "line": {"color": with_alpha(color, 0.45), "width": 1, "dash": "dot"},
        },
    ]
    if smoothing:  # the smoothed trace's label carries the raw value
        traces[0]["hoverinfo"] = "skip"
        del traces[0]["hovertemplate"]  # Plotly shows a hovertemplate whatever hoverinfo says
    return traces


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
            "hovermode": "x unified",
            "hoversort": "value descending",
            "showlegend": True,
            "legend": {"orientation": "h", "y": -0.3, "yanchor": "top", "font": {"size": 10}},
            "xaxis": {"title": {"text": X_TITLES[x_axis], "standoff": 4},
                      "type": "date" if x_axis == "wall" else "linear"},
            "yaxis": y_axis(tag, views, log_y=log_y, smoothing=smoothing),
            "yaxis2": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
            "plot_bgcolor": "#fff",
            "annotations": [] if views else [_empty_note("no run matches the filter")],
        },
    }


def _y_extent(views: list[ScalarView], smoothing: bool) -> tuple[float, float] | None:
    """The smallest and largest finite value drawn, or None when nothing finite is."""
    parts = [v.raw for v in views] + ([v.smoothed for v in views if v.smoothed is not None] if smoothing else [])
    values = np.concatenate(parts) if parts else np.empty(0)
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if len(values) else None


def y_axis(tag: str, views: list[ScalarView], *, log_y: bool, smoothing: bool) -> dict[str, Any]:
    """Plotly's autorange, except: a constant series gets a range around its value (so float noise never sets the
    scale), and a tag with a unit suffix gets ticks in IEC bytes or SI times ("512 KiB", "12 ms")."""
    axis: dict[str, Any] = {"type": "log" if log_y else "linear", "exponentformat": "e", "autorange": True}
    extent = _y_extent(views, smoothing)
    if extent is None or log_y:
        return axis
    low, high = extent
    if high - low <= CONSTANT_SPAN * max(abs(low), abs(high)):
        pad = abs(high) * CONSTANT_PAD or 1.0
        low, high = high - pad, high + pad
        axis.update(autorange=False, range=[low, high])
    unit = tag_unit(tag)
    if unit is not None:
        axis.update(_unit_ticks(low, high, unit))
    return axis


def _unit_ticks(low: float, high: float, unit: TagUnit) -> dict[str, Any]:
    values, labels = unit_ticks(low, high, unit)
    return {"tickmode": "array", "tickvals": values, "ticktext": labels}


def _empty_note(text: str) -> dict[str, Any]:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}
