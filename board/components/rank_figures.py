"""Ranks figures: step time per rank, the per-step skew across ranks, each rank's time breakdown."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.components.colors import PALETTE
from board.data.ranks import RankBreakdown, RankLine, StepSkew

# compute, wait, data, CPU wait stacked (they add up to the step), the AllReduce beside them (it overlaps compute)
PART_COLORS = {"compute": "#4e79a7", "wait": "#e15759", "data": "#edc948", "CPU wait": "#bab0ac",
               "allreduce": "#76b7b2"}


def rank_color(rank: int) -> str:
    return PALETTE[rank % len(PALETTE)]


def _floats(values: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values]


def _layout(title: str, height: int, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"}, "height": height,
            "margin": {"l": 60, "r": 10, "t": 36, "b": 45}, "legend": {"orientation": "h", "y": -0.2}, **extra}


def _empty(title: str, why: str) -> dict[str, Any]:
    return {"data": [], "layout": _layout(title, 220, annotations=[
        {"text": why, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}],
        xaxis={"visible": False}, yaxis={"visible": False})}


def _step_axis(steps: list[int], x_range: tuple[float, float] | None) -> dict[str, Any]:
    """An x axis of whole steps (no 0.2 ticks when only a few steps are logged), over `x_range` when zoomed."""
    axis: dict[str, Any] = {"title": {"text": "step"}}
    shown = list(x_range) if x_range is not None else steps
    if shown and max(shown) - min(shown) <= 10:
        axis["dtick"] = 1
    if x_range is not None:
        axis["range"] = list(x_range)
    return axis


def rank_lines_figure(lines: list[RankLine], title: str, x_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """One line per rank (its colour fixed by its rank number); `x_range`: the zoomed window of steps."""
    if not lines:
        return _empty(title, "no rank logs this series")
    data = [{"type": "scatter", "mode": "lines", "name": f"rank{line.rank.rank}", "x": line.steps.tolist(),
             "y": _floats(line.values), "line": {"color": rank_color(line.rank.rank), "width": 1.4},
             "hovertemplate": f"rank{line.rank.rank}<br>step %{{x}}: %{{y:.4g}} ms<extra></extra>"} for line in lines]
    steps = [int(step) for line in lines if len(line.steps) for step in line.steps[[0, -1]]]
    return {"data": data, "layout": _layout(title, 340, xaxis=_step_axis(steps, x_range),
                                            yaxis={"title": {"text": "ms"}, "rangemode": "tozero"},
                                            hovermode="x unified")}


def skew_figure(skew: StepSkew, shown: np.ndarray, x_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """(max − min) / median per step (the points `shown`), as a percentage; hovering names the slowest rank and the
    spread in ms."""
    title = "skew per step: (max − min) / median of the ranks' step times"
    if len(skew.steps) == 0:
        why = "no step that every rank logged" if len(skew.ranks) > 1 or not skew.ranks else "one rank: no skew"
        return _empty(title, why)
    custom = [[f"rank{int(skew.slowest[i])}", float(skew.min_ms[i]), float(skew.median_ms[i]), float(skew.max_ms[i])]
              for i in shown.tolist()]
    trace = {"type": "scatter", "mode": "lines", "name": "skew", "x": skew.steps[shown].tolist(),
             "y": _floats(skew.skew[shown]), "customdata": custom, "line": {"color": "#b07aa1", "width": 1.4},
             "hovertemplate": "step %{x}: skew %{y:.1%}<br>slowest %{customdata[0]}<br>min %{customdata[1]:.4g} · "
                              "median %{customdata[2]:.4g} · max %{customdata[3]:.4g} ms<extra></extra>"}
    median = float(np.nanmedian(skew.skew)) if np.isfinite(skew.skew).any() else None
    shapes = [] if median is None else [
        {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": median, "y1": median,
         "line": {"color": "#888", "width": 1, "dash": "dot"}, "name": "median skew"}]
    subtitle = "" if median is None else f" — median {median:.1%} over {len(skew.steps)} steps"
    return {"data": [trace], "layout": _layout(title + subtitle, 300, shapes=shapes, showlegend=False,
                                               xaxis=_step_axis([int(skew.steps[0]), int(skew.steps[-1])], x_range),
                                               yaxis={"tickformat": ".0%", "rangemode": "tozero"})}


def breakdown_figure(breakdown: tuple[RankBreakdown, ...]) -> dict[str, Any]:
    """Per rank, the medians of compute, wait, data and CPU wait stacked, the AllReduce time beside them (it may
    overlap compute), and the median step time as an outline around the stack (medians need not add up: it may
    differ)."""
    title = "median time per step by rank (ms)"
    shown = [item for item in breakdown if item.step_ms is not None]
    if not shown:
        return _empty(title, "no rank logs a step time")
    ranks = [f"rank{item.rank}" for item in shown]
    compute = [item.compute_ms or 0.0 for item in shown]
    wait = [item.wait_ms or 0.0 for item in shown]
    data_ms = [item.data_ms or 0.0 for item in shown]
    cpu_wait = [item.cpu_wait_ms or 0.0 for item in shown]
    parts = [("compute", compute, [0.0] * len(shown)), ("wait", wait, compute),
             ("data", data_ms, [c + w for c, w in zip(compute, wait)]),
             ("CPU wait", cpu_wait, [c + w + d for c, w, d in zip(compute, wait, data_ms)])]
    traces = [{"type": "bar", "name": name, "x": ranks, "y": values, "base": base, "offsetgroup": "step",
               "marker": {"color": PART_COLORS[name]},
               "hovertemplate": f"%{{x}} {name}: %{{y:.4g}} ms (median)<extra></extra>"}
              for name, values, base in parts if any(values)]
    if any(item.allreduce_ms is not None for item in shown):
        traces.append({"type": "bar", "name": "allreduce (in flight)", "x": ranks,
                       "y": [item.allreduce_ms for item in shown], "offsetgroup": "comm",
                       "marker": {"color": PART_COLORS["allreduce"], "pattern": {"shape": "/"}},
                       "hovertemplate": "%{x} AllReduce in flight: %{y:.4g} ms (median)<extra></extra>"})
    traces.append({"type": "bar", "name": "step (median)", "x": ranks, "y": [item.step_ms for item in shown],
                   "offsetgroup": "step", "marker": {"color": "rgba(0,0,0,0)", "line": {"color": "#222", "width": 2}},
                   "hovertemplate": "%{x} step: %{y:.4g} ms (median)<extra></extra>"})
    return {"data": traces, "layout": _layout(title, 340, barmode="group", yaxis={"title": {"text": "ms"}})}


def mark_alert(figure: dict[str, Any], rank: int | None, window: tuple[int, int] | None, label: str) -> dict[str, Any]:
    """An alert's evidence on a per-rank chart: its `window` of steps shaded (a shape named "alert-window") with
    `label`, its `rank`'s line drawn wider and the others fainter. Returns `figure`, changed in place."""
    layout = figure.setdefault("layout", {})
    if window is not None:
        layout["shapes"] = [*layout.get("shapes", []), {
            "type": "rect", "name": "alert-window", "xref": "x", "yref": "paper", "x0": window[0], "x1": window[1],
            "y0": 0, "y1": 1, "layer": "below", "fillcolor": "#e15759", "opacity": 0.15, "line": {"width": 0}}]
        layout["annotations"] = [*layout.get("annotations", []), {
            "text": label, "x": window[0], "xref": "x", "y": 1, "yref": "paper", "xanchor": "left", "yanchor": "bottom",
            "showarrow": False, "font": {"size": 10, "color": "#b03a2e"}}]
    if rank is not None:
        for trace in figure.get("data", []):
            if trace.get("name") == f"rank{rank}":
                trace.setdefault("line", {})["width"] = 3.2
            elif str(trace.get("name", "")).startswith("rank"):
                trace["opacity"] = 0.45
    return figure
