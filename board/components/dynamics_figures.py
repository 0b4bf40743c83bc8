"""Dynamics figures: the update-ratio heatmap with the healthy band, per-layer lines, a marked step."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.components.colors import PALETTE
from board.data.dynamics import HEALTHY_UPDATE_RATIO, RatioMatrix
from board.data.views import ScalarView

LOG10_RANGE = (-6.0, 1.0)  # heatmap colour range of log10(update ratio); values beyond are clipped
_LOW, _HIGH = (float(np.log10(v)) for v in HEALTHY_UPDATE_RATIO)


def _fraction(log10_value: float) -> float:
    return (log10_value - LOG10_RANGE[0]) / (LOG10_RANGE[1] - LOG10_RANGE[0])


# Blue below the band (vanishing), green inside it, orange to red above it (exploding).
COLORSCALE = [[0.0, "#08306b"], [_fraction(_LOW) - 0.001, "#9ecae1"], [_fraction(_LOW), "#41ab5d"],
              [_fraction(_HIGH), "#41ab5d"], [_fraction(_HIGH) + 0.001, "#fdae6b"], [_fraction(0.0), "#e6550d"],
              [1.0, "#67000d"]]


def _step_marker(step: int | None) -> list[dict[str, Any]]:
    if step is None:
        return []
    return [{"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0, "y1": 1,
             "line": {"color": "#d62728", "width": 2, "dash": "dot"}, "name": "selected step"}]


def _layout(title: str, height: int, step: int | None, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"}, "height": height,
            "margin": {"l": 60, "r": 10, "t": 32, "b": 45}, "xaxis": {"title": {"text": "step"}},
            "shapes": _step_marker(step), "legend": {"orientation": "h", "y": -0.25}, **extra}


def ratio_heatmap(matrix: RatioMatrix, step: int | None = None) -> dict[str, Any]:
    """Rows: parameters; columns: steps; colour: log10(‖Δw‖/‖w‖), the healthy band green."""
    z = np.clip(matrix.log10_ratios, *LOG10_RANGE)
    z_list = [[None if np.isnan(v) else float(v) for v in row] for row in z]
    ticks = list(range(int(LOG10_RANGE[0]), int(LOG10_RANGE[1]) + 1))
    binned = f" (each column: {matrix.steps_per_column} steps, the value farthest from the band)" \
        if matrix.steps_per_column > 1 else ""
    trace = {"type": "heatmap", "x": matrix.steps.tolist(), "y": list(matrix.names), "z": z_list,
             "zmin": LOG10_RANGE[0], "zmax": LOG10_RANGE[1], "colorscale": COLORSCALE,
             "colorbar": {"title": {"text": "‖Δw‖/‖w‖"}, "tickvals": ticks, "ticktext": [f"1e{t}" for t in ticks]},
             "hovertemplate": "%{y}<br>step %{x}<br>log10 ratio %{z:.2f}<extra></extra>"}
    layout = _layout(f"update ratio by layer — healthy band {HEALTHY_UPDATE_RATIO[0]:g}..{HEALTHY_UPDATE_RATIO[1]:g} "
                     f"in green{binned}", max(260, 60 + 22 * len(matrix.names)), step,
                     yaxis={"autorange": "reversed", "automargin": True})
    return {"data": [trace], "layout": layout}


def layer_lines(title: str, views: list[ScalarView], prefix: str, suffix: str = "", *, log_y: bool,
                step: int | None = None, band: tuple[float, float] | None = None,
                y_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """One line per layer (the tag without ``prefix`` and ``suffix``); optionally a shaded band, a fixed y range."""
    data = []
    for index, view in enumerate(views):
        name = view.tag[len(prefix):len(view.tag) - len(suffix)]
        values = view.raw if not log_y else np.where(view.raw > 0, view.raw, np.nan)
        data.append({"type": "scatter", "mode": "lines", "name": name, "x": view.x.tolist(),
                     "y": [None if not np.isfinite(v) else float(v) for v in values],
                     "line": {"color": PALETTE[index % len(PALETTE)], "width": 1.4},
                     "hovertemplate": f"{name}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"})
    yaxis: dict[str, Any] = {"type": "log" if log_y else "linear", "exponentformat": "power" if log_y else "none"}
    if y_range is not None:
        yaxis["range"] = list(y_range)
    layout = _layout(title, 320, step, yaxis=yaxis)
    if band is not None:
        layout["shapes"] = [{"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": band[0],
                             "y1": band[1], "fillcolor": "rgba(65,171,93,0.15)", "line": {"width": 0},
                             "layer": "below", "name": "healthy band"}] + layout["shapes"]
    return {"data": data, "layout": layout}
