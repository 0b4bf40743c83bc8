"""System charts: a run shorter than one sampling interval has a single point, which must stay visible."""
from __future__ import annotations

import numpy as np

from board.components.scalar_figure import FEW_POINTS
from board.components.system_figure import system_figure
from board.data.system import SystemSeries


def _series(points: int) -> SystemSeries:
    return SystemSeries("sys/rss_bytes", np.arange(points, dtype=np.float64), np.full(points, 1e6))


def test_a_lone_sample_is_drawn_with_a_marker_and_a_long_series_as_a_line() -> None:
    lone = system_figure("RSS (process + children)", [_series(1)], "step")["data"][0]
    assert lone["mode"] == "lines+markers" and lone["x"] == [0.0] and lone["y"] == [1e6]
    assert system_figure("RSS", [_series(FEW_POINTS + 1)], "step")["data"][0]["mode"] == "lines"
