"""Histogram charts: TensorBoard-like offset ("ridgeline") and distribution (percentile bands) views."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.components.colors import run_color, with_alpha
from board.components.measured_traces import series_traces
from board.data.histograms import (BASIS_POINTS, HistogramPoint, evenly_spaced, finite_bounds, left_out, percentiles,
                                   rebin)

RIDGES = 30
BINS = 60
_BAND_PAIRS = ((0, 8), (1, 7), (2, 6), (3, 5))  # indices into BASIS_POINTS, outermost band first


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"},
        "height": 340,
        "margin": {"l": 60, "r": 10, "t": 30, "b": 40},
        "plot_bgcolor": "#fff",
        "showlegend": False,
        **extra,
    }


def nonfinite_note(points: list[HistogramPoint]) -> str:
    """What was left out of the buckets (NaN/±Inf), in words; "" when nothing was."""
    counts = [(point.step, left_out(point)) for point in points]
    hit = [(step, count) for step, count in counts if count]
    if not hit:
        return ""
    empty = sum(1 for point in points if not np.isfinite(finite_bounds(point)[0]))
    where = f"step {hit[0][0]}" if len(hit) == 1 else f"{len(hit)} of {len(points)} steps, first {hit[0][0]}"
    return (f"{sum(count for _, count in hit):,} NaN/Inf values left out ({where})"
            + (f"; {empty} histogram(s) with no finite value not drawn" if empty else ""))


def _nulls(values: np.ndarray) -> list[float | None]:
    return [float(value) if np.isfinite(value) else None for value in values]


def _titled(title: str, note: str) -> str:
    return f"{title}<br><span style='font-size:11px;color:#b22'>{note}</span>" if note else title


def ridgeline_figure(title: str, run: str, points: list[HistogramPoint], *,
                     upto_step: int | None = None) -> dict[str, Any]:
    """Up to `RIDGES` histograms (steps <= `upto_step`), each offset upwards by its order, newest in front."""
    shown = [p for p in points if upto_step is None or p.step <= upto_step]
    note = nonfinite_note(shown)
    shown = [p for p in shown if np.isfinite(finite_bounds(p)[0])]  # a histogram of NaN/Inf only has no ridge
    chosen = [shown[i] for i in evenly_spaced(len(shown), RIDGES)]
    if not chosen:
        return {"data": [], "layout": _layout(_titled(title, note), margin={"l": 60, "r": 10, "t": 50, "b": 40})}
    bounds = [finite_bounds(p) for p in chosen]
    low = min(bound[0] for bound in bounds)
    high = max(bound[1] for bound in bounds)
    if high <= low:
        high = low + 1.0
    grid = np.linspace(low, high, BINS + 1)
    centres = ((grid[:-1] + grid[1:]) / 2).tolist()
    densities = [rebin(p, grid) for p in chosen]
    peak = max(float(d.max()) for d in densities) or 1.0
    color = run_color(run)
    data = []
    for order, (point, density) in reversed(list(enumerate(zip(chosen, densities)))):
        offset = float(order)
        shade = 0.25 + 0.75 * (order + 1) / len(chosen)
        ys = (offset + 2.5 * density / peak).tolist()
        data.append({
            "type": "scatter", "mode": "lines", "x": [low, *centres, high], "y": [offset, *ys, offset],
            "fill": "toself", "fillcolor": with_alpha(color, 0.15 + 0.35 * shade),
            "line": {"color": with_alpha(color, shade), "width": 1},
            "name": f"step {point.step}",
            "hovertemplate": f"step {point.step}<br>%{{x:.4g}}" + (f"<br>{left_out(point)} NaN/Inf left out"
                                                                  if left_out(point) else "") + "<extra></extra>",
        })
    ticks = evenly_spaced(len(chosen), 8)
    layout = _layout(
        _titled(title, note), margin={"l": 60, "r": 10, "t": 50 if note else 30, "b": 40},
        xaxis={"title": {"text": "value"}},
        yaxis={"title": {"text": "step"}, "tickvals": [float(i) for i in ticks],
               "ticktext": [str(chosen[i].step) for i in ticks]},
    )
    return {"data": data, "layout": layout}


def distribution_figure(title: str, run: str, points: list[HistogramPoint], *,
                        marked_step: int | None = None) -> dict[str, Any]:
    """Bands between TensorBoard's basis points (min..max, ±2σ, ±1.5σ, ±σ equivalents) and the median, over steps.

    Histograms taken at every step: filled bands, as TensorBoard draws them. Taken every k steps: a bar of the bands
    at each step a histogram was taken and the median's markers, a faint dotted connector across the steps between
    (no band is filled over steps nothing was measured at)."""
    if not points:
        return {"data": [], "layout": _layout(title)}
    note = nonfinite_note(points)
    steps = [p.step for p in points]
    bands = np.array([percentiles(p) for p in points])  # (steps, basis points)
    color = run_color(run)
    if len(steps) > 1 and int(np.max(np.diff(steps))) > 1:
        data = _band_bars(steps, bands, color)
    else:
        data = _band_fills(steps, bands, color)
    shapes = []
    if marked_step is not None:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": marked_step, "x1": marked_step, "y0": 0,
                       "y1": 1, "line": {"color": "#888", "dash": "dot", "width": 1}})
    layout = _layout(_titled(title, note), margin={"l": 60, "r": 10, "t": 50 if note else 30, "b": 40},
                     xaxis={"title": {"text": "step"}}, yaxis={"title": {"text": "value"}}, shapes=shapes)
    return {"data": data, "layout": layout}


def _band_name(lo: int, hi: int) -> str:
    return f"p{BASIS_POINTS[lo] / 100:g}–p{BASIS_POINTS[hi] / 100:g}"


def _band_bars(steps: list[int], bands: np.ndarray, color: str) -> list[dict[str, Any]]:
    """Each band a vertical bar at each histogram's step (one trace per band: segments split by None)."""
    data: list[dict[str, Any]] = []
    for depth, (lo, hi) in enumerate(_BAND_PAIRS):
        x = [value for step in steps for value in (step, step, None)]
        y = [value for low, high in zip(_nulls(bands[:, lo]), _nulls(bands[:, hi])) for value in (low, high, None)]
        data.append({"type": "scatter", "mode": "lines", "x": x, "y": y, "name": _band_name(lo, hi),
                     "line": {"width": 9, "color": with_alpha(color, 0.12 + 0.12 * depth)}, "hoverinfo": "skip"})
    median = np.asarray(bands[:, 4], float)
    return data + series_traces("median", np.asarray(steps), median, color, "step %{x}<br>median %{y:.4g}"
                                "<extra></extra>")


def _band_fills(steps: list[int], bands: np.ndarray, color: str) -> list[dict[str, Any]]:
    """Bands filled between consecutive steps (every step holds a histogram) and the median's line."""
    data: list[dict[str, Any]] = []
    for depth, (lo, hi) in enumerate(_BAND_PAIRS):
        alpha = 0.12 + 0.12 * depth
        data.append({"type": "scatter", "mode": "lines", "x": steps, "y": _nulls(bands[:, lo]),
                     "line": {"width": 0, "color": color}, "hoverinfo": "skip"})
        data.append({"type": "scatter", "mode": "lines", "x": steps, "y": _nulls(bands[:, hi]), "fill": "tonexty",
                     "fillcolor": with_alpha(color, alpha), "line": {"width": 0, "color": color},
                     "name": _band_name(lo, hi), "hoverinfo": "skip"})
    data.append({"type": "scatter", "mode": "lines+markers", "x": steps, "y": _nulls(bands[:, 4]), "name": "median",
                 "marker": {"size": 4, "color": color},  # a marker per histogram: the steps it was taken at
                 "line": {"color": color, "width": 1.5},
                 "hovertemplate": "step %{x}<br>median %{y:.4g}<extra></extra>"})
    return data
