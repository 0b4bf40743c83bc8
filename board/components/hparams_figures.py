"""Pure figure builders of the HParams page: parallel coordinates and a metric-vs-hyperparameter scatter.

Plain dicts with NumPy arrays, not plotly.graph_objects: validating a thousand runs' lines took the page ~0.1 s of
server time, and arrays are written to JSON at C speed."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from board.data.hparams_table import HParamsTable, HParamValue


def _numeric(values: list[HParamValue]) -> bool:
    return all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values if value is not None)


@dataclass(frozen=True, slots=True)
class Axis:
    label: str
    positions: list[float]  # each run's place on the axis in [0, 1]; NaN where it has no value
    tick_positions: list[float]
    tick_labels: list[str]


def _axis(label: str, values: list[HParamValue]) -> Axis:
    """A numeric axis scaled to [0, 1] (ticks at the ends), or a categorical one (strings, booleans). A run without
    a value (None, NaN) has no place on the axis (NaN: its line breaks there), not the axis' only value."""
    if _numeric(values):
        numbers = [float(value) if value is not None and math.isfinite(float(value)) else math.nan for value in values]
        finite = [number for number in numbers if not math.isnan(number)]
        if not finite:
            return Axis(label, [math.nan] * len(values), [], [])
        low, high = min(finite), max(finite)
        span = high - low or 1.0
        positions = [math.nan if math.isnan(number) else (number - low) / span if high > low else 0.5
                     for number in numbers]
        return Axis(label, positions, [0.0, 1.0] if high > low else [0.5],
                    [f"{low:.4g}", f"{high:.4g}"] if high > low else [f"{low:.4g}"])
    categories = sorted({str(value) for value in values if value is not None})
    step = 1.0 / max(1, len(categories) - 1)
    place = {category: index * step if len(categories) > 1 else 0.5 for index, category in enumerate(categories)}
    return Axis(label, [math.nan if value is None else place[str(value)] for value in values], list(place.values()),
                categories)


COLOR_BINS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")  # viridis, low to high


def _figure(title: str, height: int, data: list[dict[str, Any]] | None = None, **layout: Any) -> dict[str, Any]:
    return {"data": data or [], "layout": {"title": {"text": title}, "height": height, **layout}}


def parallel_coordinates(table: HParamsTable, color_metric: str | None) -> dict[str, Any]:
    """One line per run across every hyperparameter and metric axis, coloured by `color_metric` (five bins).

    Drawn as SVG lines (one trace per colour bin), not Plotly's WebGL `parcoords`, so that it shows in any browser
    and stays fast with a thousand runs."""
    rows = table.rows
    if not rows:
        return _figure("no hparams logged yet", 360)
    axes = [_axis(name, [row.hparams.get(name) for row in rows]) for name in table.hparam_names]
    axes += [_axis(tag, [row.metrics.get(tag, math.nan) for row in rows]) for tag in table.metric_tags]
    colour = _axis(color_metric, [row.metrics.get(color_metric, math.nan) for row in rows]) \
        if color_metric in table.metric_tags else None
    # a run's line: its place on each axis, then a gap (NaN: Plotly breaks the line there, connectgaps off)
    places = np.full((len(rows), len(axes) + 1), np.nan)
    for column, axis in enumerate(axes):
        places[:, column] = axis.positions
    positions = np.array(colour.positions) if colour else np.full(len(rows), np.nan)
    bins = np.where(np.isnan(positions), -1,
                    np.minimum(len(COLOR_BINS) - 1, np.nan_to_num(positions) * len(COLOR_BINS)).astype(int))
    x = np.append(np.arange(len(axes), dtype=float), np.nan)
    names = np.array([row.run for row in rows], dtype=object)
    data = []
    for bin_index in sorted(set(bins.tolist())):
        members = np.flatnonzero(bins == bin_index)
        # NOTE: lines only: a marker is an SVG node per run and axis, which costs the browser seconds at 1,000 runs
        data.append({"type": "scatter", "mode": "lines", "connectgaps": False, "opacity": 0.75, "showlegend": False,
                     "x": np.tile(x, len(members)), "y": places[members].ravel(),
                     "text": [name for name in names[members] for _ in range(len(axes) + 1)],
                     "line": {"color": "#999" if bin_index < 0 else COLOR_BINS[bin_index], "width": 1.5},
                     "hovertemplate": "%{text}<extra></extra>"})
    shapes = [{"type": "line", "x0": index, "x1": index, "y0": 0, "y1": 1, "line": {"color": "#333", "width": 1}}
              for index in range(len(axes))]
    annotations = [{"x": index, "y": position, "text": label, "showarrow": False, "xanchor": "left", "xshift": 4,
                    "font": {"size": 11}, "bgcolor": "rgba(255,255,255,0.7)"}
                   for index, axis in enumerate(axes) for position, label in zip(axis.tick_positions, axis.tick_labels)]
    title = f"{len(rows)} runs" + (f", colour: {color_metric} (low → high: purple → yellow)" if colour else "")
    return _figure(title, 420, data, margin={"l": 40, "r": 80, "t": 60, "b": 60}, hovermode="closest",
                   plot_bgcolor="#fff", shapes=shapes, annotations=annotations,
                   xaxis={"tickvals": list(range(len(axes))), "ticktext": [axis.label for axis in axes],
                          "range": [-0.2, len(axes) - 0.4], "showgrid": False, "zeroline": False},
                   yaxis={"visible": False, "range": [-0.05, 1.05]})


def metric_scatter(table: HParamsTable, hparam: str | None, metric: str | None) -> dict[str, Any]:
    """The metric's final value against one hyperparameter, a point per run (run name on hover)."""
    if not hparam or not metric:
        return _figure("choose a hyperparameter and a metric", 380)
    points = [(row.hparams.get(hparam), row.metrics.get(metric), row.run) for row in table.rows
              if hparam in row.hparams and metric in row.metrics]
    x_values = [x if _numeric([x]) else str(x) for x, _, _ in points]
    trace = {"type": "scatter", "mode": "markers", "marker": {"size": 9}, "x": x_values,
             "y": np.array([y for _, y, _ in points], dtype=float), "text": [run for _, _, run in points],
             "hovertemplate": "%{text}<br>" + hparam + " %{x}<br>" + metric + " %{y}<extra></extra>"}
    return _figure(f"{metric} vs {hparam}", 380, [trace], xaxis={"title": {"text": hparam}},
                   yaxis={"title": {"text": metric}}, margin={"l": 60, "r": 20, "t": 50, "b": 50})
