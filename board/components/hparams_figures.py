"""Pure figure builders of the HParams page: parallel coordinates and a metric-vs-hyperparameter scatter."""
from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

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
    """A numeric axis scaled to [0, 1] (ticks at the ends), or a categorical one (strings, booleans)."""
    if _numeric(values):
        numbers = [float(value) if value is not None and math.isfinite(float(value)) else math.nan for value in values]
        finite = [number for number in numbers if not math.isnan(number)]
        if not finite:
            return Axis(label, [math.nan] * len(values), [], [])
        low, high = min(finite), max(finite)
        span = high - low or 1.0
        positions = [(number - low) / span if high > low else 0.5 for number in numbers]
        return Axis(label, positions, [0.0, 1.0] if high > low else [0.5],
                    [f"{low:.4g}", f"{high:.4g}"] if high > low else [f"{low:.4g}"])
    categories = sorted({str(value) for value in values})
    step = 1.0 / max(1, len(categories) - 1)
    place = {category: index * step if len(categories) > 1 else 0.5 for index, category in enumerate(categories)}
    return Axis(label, [place[str(value)] for value in values], list(place.values()), categories)


COLOR_BINS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")  # viridis, low to high


def parallel_coordinates(table: HParamsTable, color_metric: str | None) -> go.Figure:
    """One line per run across every hyperparameter and metric axis, coloured by `color_metric` (five bins).

    Drawn as SVG lines (one trace per colour bin), not Plotly's WebGL `parcoords`, so that it shows in any browser
    and stays fast with a thousand runs."""
    rows = table.rows
    figure = go.Figure()
    if not rows:
        figure.update_layout(title="no hparams logged yet", height=360)
        return figure
    axes = [_axis(name, [row.hparams.get(name) for row in rows]) for name in table.hparam_names]
    axes += [_axis(tag, [row.metrics.get(tag, math.nan) for row in rows]) for tag in table.metric_tags]
    colour = _axis(color_metric, [row.metrics.get(color_metric, math.nan) for row in rows]) \
        if color_metric in table.metric_tags else None
    bins: dict[int, tuple[list, list, list]] = {}
    for index, row in enumerate(rows):
        position = colour.positions[index] if colour else math.nan
        bin_index = -1 if math.isnan(position) else min(len(COLOR_BINS) - 1, int(position * len(COLOR_BINS)))
        xs, ys, names = bins.setdefault(bin_index, ([], [], []))
        xs += [*range(len(axes)), None]
        ys += [*(axis.positions[index] for axis in axes), None]
        names += [row.run] * len(axes) + [None]
    for bin_index, (xs, ys, names) in sorted(bins.items()):
        # NOTE: lines only: a marker is an SVG node per run and axis, which costs the browser seconds at 1,000 runs
        figure.add_trace(go.Scatter(x=xs, y=ys, text=names, mode="lines", connectgaps=False,
                                    line={"color": "#999" if bin_index < 0 else COLOR_BINS[bin_index], "width": 1.5},
                                    opacity=0.75, showlegend=False,
                                    hovertemplate="%{text}<extra></extra>"))
    for index, axis in enumerate(axes):
        figure.add_shape(type="line", x0=index, x1=index, y0=0, y1=1, line={"color": "#333", "width": 1})
        for position, label in zip(axis.tick_positions, axis.tick_labels):
            figure.add_annotation(x=index, y=position, text=label, showarrow=False, xanchor="left", xshift=4,
                                  font={"size": 11}, bgcolor="rgba(255,255,255,0.7)")
    title = f"{len(rows)} runs" + (f", colour: {color_metric} (low → high: purple → yellow)" if colour else "")
    figure.update_layout(title=title, height=420, margin={"l": 40, "r": 80, "t": 60, "b": 60}, hovermode="closest",
                         plot_bgcolor="#fff",
                         xaxis={"tickvals": list(range(len(axes))), "ticktext": [axis.label for axis in axes],
                                "range": [-0.2, len(axes) - 0.4], "showgrid": False, "zeroline": False},
                         yaxis={"visible": False, "range": [-0.05, 1.05]})
    return figure


def metric_scatter(table: HParamsTable, hparam: str | None, metric: str | None) -> go.Figure:
    """The metric's final value against one hyperparameter, a point per run (run name on hover)."""
    figure = go.Figure()
    if not hparam or not metric:
        figure.update_layout(title="choose a hyperparameter and a metric", height=380)
        return figure
    points = [(row.hparams.get(hparam), row.metrics.get(metric), row.run) for row in table.rows
              if hparam in row.hparams and metric in row.metrics]
    x_values = [x if _numeric([x]) else str(x) for x, _, _ in points]
    figure.add_trace(go.Scatter(x=x_values, y=[y for _, y, _ in points], text=[run for _, _, run in points],
                                mode="markers", marker={"size": 9},
                                hovertemplate="%{text}<br>" + hparam + " %{x}<br>" + metric + " %{y}<extra></extra>"))
    figure.update_layout(title=f"{metric} vs {hparam}", xaxis={"title": hparam}, yaxis={"title": metric}, height=380,
                         margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return figure
