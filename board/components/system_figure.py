"""System charts: one line per metric (CPU, RSS, GPU memory/utilisation/power/temperature) on step or time axis."""
from __future__ import annotations

from typing import Any

import numpy as np

from board.components.scalar_figure import FEW_POINTS, X_TITLES, display_x
from board.data.system import SystemSeries
from board.data.views import XAxis
from instrumentation.format.tags import MEMORY
from instrumentation.format.units import bytes_axis, format_bytes

UNITS = {"percent": ("%", "none"), "_w": (" W", "none"), "_c": (" °C", "none")}


def _label(tag: str) -> str:
    """A line's legend: the metric, ``engine …`` for the engine's own device memory drawn beside NVML's."""
    return ("engine " if tag.startswith(MEMORY) else "") + tag.rsplit("/", 1)[-1]


def system_figure(title: str, lines: list[SystemSeries], x_axis: XAxis) -> dict[str, Any]:
    in_bytes = bool(lines) and lines[0].tag.endswith("bytes")
    suffix, exponent = next((u for key, u in UNITS.items() if lines and lines[0].tag.endswith(key)), ("", "none"))
    yaxis = {"ticksuffix": suffix, "exponentformat": exponent, "rangemode": "tozero"}
    if in_bytes:  # IEC ticks and hover text (Plotly's own formats are SI)
        highest = max((float(np.max(y)) for s in lines if len(y := s.y[np.isfinite(s.y)])), default=0.0)
        yaxis = bytes_axis(highest, title="")
    return {"data": [{"type": "scatter", "mode": "lines+markers" if len(s.y) <= FEW_POINTS else "lines",
                      "name": _label(s.tag), "x": display_x(s.x, x_axis), "y": s.y.tolist(),
                      **({"customdata": [format_bytes(v) for v in s.y.tolist()],
                          "hovertemplate": f"{s.tag}<br>%{{x}}: %{{customdata}}<extra></extra>"} if in_bytes else
                         {"hovertemplate": f"{s.tag}<br>%{{x}}: %{{y:,.4g}}{suffix}<extra></extra>"})}
                     for s in lines],
            "layout": {"title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"}, "height": 300,
                       "margin": {"l": 60, "r": 10, "t": 30, "b": 60}, "plot_bgcolor": "#fff", "hovermode": "x unified",
                       "xaxis": {"title": {"text": X_TITLES[x_axis], "standoff": 4},
                                 "type": "date" if x_axis == "wall" else "linear"},
                       "yaxis": yaxis,
                       "showlegend": len(lines) > 1, "legend": {"orientation": "h", "y": -0.25, "yanchor": "top"},
                       "annotations": [] if lines else [{"text": "no samples", "xref": "paper", "yref": "paper",
                                                         "x": 0.5, "y": 0.5, "showarrow": False}]}}
