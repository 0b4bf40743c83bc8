"""Pure figure builders of the HParams page: parallel coordinates and a metric-vs-hyperparameter scatter."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from board.data.hparams_table import HParamsTable, HParamValue


def _numeric(values: list[HParamValue]) -> bool:
    return all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values if value is not None)


def _dimension(label: str, values: list[HParamValue]) -> dict:
    """A numeric axis, or a categorical one (strings, booleans) with its categories as tick labels."""
    if _numeric(values):
        numbers = [math.nan if value is None else float(value) for value in values]
        return {"label": label, "values": numbers}
    categories = sorted({str(value) for value in values})
    index = {category: position for position, category in enumerate(categories)}
    return {"label": label, "values": [index[str(value)] for value in values], "tickvals": list(range(len(categories))),
            "ticktext": categories}


def parallel_coordinates(table: HParamsTable, color_metric: str | None) -> go.Figure:
    """One line per run across every hyperparameter and metric axis, coloured by `color_metric`."""
    rows = table.rows
    figure = go.Figure()
    if not rows:
        figure.update_layout(title="no hparams logged yet", height=360)
        return figure
    dimensions = [_dimension(name, [row.hparams.get(name) for row in rows]) for name in table.hparam_names]
    dimensions += [_dimension(tag, [row.metrics.get(tag, math.nan) for row in rows]) for tag in table.metric_tags]
    line: dict = {}
    if color_metric in table.metric_tags:
        line = {"color": [row.metrics.get(color_metric, math.nan) for row in rows], "colorscale": "Viridis",
                "showscale": True, "colorbar": {"title": color_metric}}
    figure.add_trace(go.Parcoords(dimensions=dimensions, line=line))
    figure.update_layout(title=f"{len(rows)} runs", height=420, margin={"l": 60, "r": 60, "t": 70, "b": 30})
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
