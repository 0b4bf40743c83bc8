"""Dynamics figures: the update-ratio heatmap with the healthy band, per-layer lines with a marker at each measured
step (a solid line only between adjacent steps, a faint dotted connector across steps not measured), the loss, and
an alert's step marked on the chart that holds its evidence."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from board.components.colors import PALETTE
from board.components.measured_traces import series_traces
from board.data.dynamics import HEALTHY_UPDATE_RATIO, RatioMatrix
from board.data.views import ScalarView

LOG10_RANGE = (-6.0, 1.0)  # heatmap colour range of log10(update ratio); values beyond are clipped
_LOW, _HIGH = (float(np.log10(v)) for v in HEALTHY_UPDATE_RATIO)
ALERT_COLOR = "#d62728"
LOSS_LOG_SPAN = 50.0  # a positive loss spanning more than this factor is drawn on a log axis (a spike hides the rest)
MARKED_NAME = "alert"  # the name of the marker trace drawn at an alert's step (tests look for it)


def _fraction(log10_value: float) -> float:
    return (log10_value - LOG10_RANGE[0]) / (LOG10_RANGE[1] - LOG10_RANGE[0])


# Blue below the band (vanishing), green inside it, orange to red above it (exploding).
COLORSCALE = [[0.0, "#08306b"], [_fraction(_LOW) - 0.001, "#9ecae1"], [_fraction(_LOW), "#41ab5d"],
              [_fraction(_HIGH), "#41ab5d"], [_fraction(_HIGH) + 0.001, "#fdae6b"], [_fraction(0.0), "#e6550d"],
              [1.0, "#67000d"]]


@dataclass(frozen=True, slots=True)
class StepMark:
    """A step to mark on every chart; with an alert's kind and subject, the chart of its evidence marks the value."""

    step: int
    kind: str = ""
    subject: str = ""


def _step_marker(mark: StepMark | None) -> list[dict[str, Any]]:
    if mark is None:
        return []
    return [{"type": "line", "xref": "x", "yref": "paper", "x0": mark.step, "x1": mark.step, "y0": 0, "y1": 1,
             "line": {"color": ALERT_COLOR, "width": 2, "dash": "dot"}, "name": "selected step"}]


def _layout(title: str, height: int, mark: StepMark | None, uirevision: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"}, "height": height,
            "margin": {"l": 60, "r": 10, "t": 32, "b": 45}, "xaxis": {"title": {"text": "step"}},
            "shapes": _step_marker(mark), "legend": {"orientation": "h", "y": -0.25},
            "uirevision": uirevision, **extra}  # uirevision: a poll's redraw keeps the reader's zoom


def ratio_heatmap(matrix: RatioMatrix, mark: StepMark | None = None, uirevision: str = "") -> dict[str, Any]:
    """Rows: parameters; columns: measured steps (bounded by ``matrix.edges``: steps not measured are a blank
    column, never part of a cell); colour: log10(‖Δw‖/‖w‖), the healthy band green."""
    z = np.clip(matrix.log10_ratios, *LOG10_RANGE)
    z_list = [[None if np.isnan(v) else float(v) for v in row] for row in z]
    ticks = list(range(int(LOG10_RANGE[0]), int(LOG10_RANGE[1]) + 1))
    binned = f" (each column: {matrix.steps_per_column} steps, the value farthest from the band)" \
        if matrix.steps_per_column > 1 else ""
    trace = {"type": "heatmap", "x": matrix.edges.tolist(), "y": list(matrix.names), "z": z_list,
             "customdata": [matrix.steps.tolist()] * len(matrix.names),
             "zmin": LOG10_RANGE[0], "zmax": LOG10_RANGE[1], "colorscale": COLORSCALE, "hoverongaps": False,
             "colorbar": {"title": {"text": "‖Δw‖/‖w‖"}, "tickvals": ticks, "ticktext": [f"1e{t}" for t in ticks]},
             "hovertemplate": "%{y}<br>step %{customdata}<br>log10 ratio %{z:.2f}<extra></extra>"}
    gaps = int((~matrix.measured).sum())
    unmeasured = f"; blank: {gaps} stretch(es) of steps not measured" if gaps else ""
    layout = _layout(f"update ratio by layer — healthy band {HEALTHY_UPDATE_RATIO[0]:g}..{HEALTHY_UPDATE_RATIO[1]:g} "
                     f"in green{binned}{unmeasured}", max(260, 60 + 22 * len(matrix.names)), mark, uirevision,
                     yaxis={"autorange": "reversed", "automargin": True}, plot_bgcolor="#fff")
    return {"data": [trace], "layout": layout}


def _lowest(values: list[np.ndarray]) -> float | None:
    """The lowest finite value drawn (where a marker for a step with no value sits: the chart's bottom)."""
    finite = [float(np.min(v[np.isfinite(v)])) for v in values if np.isfinite(v).any()]
    return min(finite) if finite else None


def _value_at(x: np.ndarray, values: np.ndarray, step: int) -> float | None:
    found = np.flatnonzero(np.asarray(x) == step)
    if not len(found) or not np.isfinite(values[found[0]]):
        return None
    return float(values[found[0]])


def alert_marker(step: int, value: float | str | None, kind: str, subject: str, y_low: float | None = None
                 ) -> dict[str, Any]:
    """A ring at the alert's value (a heatmap's row name), or, not measured there, a triangle at ``y_low``."""
    label = f"{kind} · {subject}" if subject and kind else kind or subject or "selected step"
    return {"type": "scatter", "mode": "markers+text", "name": MARKED_NAME, "x": [step],
            "y": [value if value is not None else y_low], "text": [label], "textposition": "top center",
            "textfont": {"color": ALERT_COLOR, "size": 11}, "showlegend": False, "cliponaxis": False,
            "marker": {"symbol": "circle-open" if value is not None else "triangle-up", "size": 16,
                       "color": ALERT_COLOR, "line": {"width": 2.5, "color": ALERT_COLOR}},
            "hovertemplate": f"{label}<br>step %{{x}}<extra></extra>"}


def layer_lines(title: str, views: list[ScalarView], prefix: str, suffix: str = "", *, log_y: bool,
                mark: StepMark | None = None, mark_subject: bool = False, band: tuple[float, float] | None = None,
                y_range: tuple[float, float] | None = None, uirevision: str = "") -> dict[str, Any]:
    """One series per layer (the tag without ``prefix`` and ``suffix``); optionally a shaded band, a fixed y range,
    and (``mark_subject``) a marker on the layer named by the mark's subject at its step."""
    data = []
    marked = None
    drawn = [view.raw if not log_y else np.where(view.raw > 0, view.raw, np.nan) for view in views]
    for index, view in enumerate(views):
        name = view.tag[len(prefix):len(view.tag) - len(suffix)]
        values = view.raw if not log_y else np.where(view.raw > 0, view.raw, np.nan)
        # NOTE: the trace's name is not repeated in the hover text (Plotly shows it beside the box)
        data += series_traces(name, view.x, values, PALETTE[index % len(PALETTE)], "step %{x}: %{y:.4g}",
                              view.unmeasured_before)
        if mark is not None and mark_subject and name == mark.subject:
            marked = alert_marker(mark.step, _value_at(view.x, values, mark.step), mark.kind, mark.subject,
                                  y_range[0] if y_range else _lowest(drawn))
    if marked is not None:
        data.append(marked)
    yaxis: dict[str, Any] = {"type": "log" if log_y else "linear", "exponentformat": "power" if log_y else "none"}
    if y_range is not None:
        yaxis["range"] = list(y_range)
    layout = _layout(title, 320, mark, uirevision, yaxis=yaxis)
    if band is not None:
        layout["shapes"] = [{"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": band[0],
                             "y1": band[1], "fillcolor": "rgba(65,171,93,0.15)", "line": {"width": 0},
                             "layer": "below", "name": "healthy band"}] + layout["shapes"]
    return {"data": data, "layout": layout}


def loss_figure(view: ScalarView | None, mark: StepMark | None = None, mark_loss: bool = False,
                uirevision: str = "") -> dict[str, Any]:
    """The run's loss as watch() logs it (every step); ``mark_loss``: a marker at the mark's step."""
    if view is None:
        return {"data": [], "layout": _layout("loss: no train/loss tag in this run (log it with handle.log_loss(loss) "
                                              "or pass the handle to engine.fit)", 200, mark, uirevision)}
    data = series_traces(view.tag, view.x, view.raw, PALETTE[0], "step %{x}: %{y:.4g}", view.unmeasured_before)
    if mark is not None and mark_loss:
        data.append(alert_marker(mark.step, _value_at(view.x, view.raw, mark.step), mark.kind, mark.subject,
                                 _lowest([view.raw])))
    finite = view.raw[np.isfinite(view.raw)]
    log_y = bool(len(finite)) and finite.min() > 0 and finite.max() / finite.min() > LOSS_LOG_SPAN
    scale = " (log)" if log_y else ""
    return {"data": data, "layout": _layout(f"{view.tag}{scale}", 300, mark, uirevision,
                                            yaxis={"type": "log" if log_y else "linear"})}
