"""Scalar figure builder: short series keep visible markers, long ones are plain lines."""
from __future__ import annotations

import numpy as np

from board.components.scalar_figure import FEW_POINTS, run_traces
from board.data.views import ScalarView


def view(points: int) -> ScalarView:
    x = np.arange(points, dtype=np.float64)
    return ScalarView(run="r", tag="t", x=x, raw=x * 2, smoothed=None, nonfinite_x=np.zeros(0),
                      nonfinite_values=np.zeros(0), window_points=points, revision=0, length=points,
                      origin_wall_time=0.0, unmeasured_before=np.zeros(points, bool), sampling=None)


def test_a_single_point_is_drawn_with_a_marker():
    raw = run_traces(view(1), "step", smoothing=False)[0]
    assert raw["mode"] == "lines+markers" and list(raw["x"]) == [0.0] and list(raw["y"]) == [0.0]


def test_a_long_series_is_a_plain_line():
    assert run_traces(view(FEW_POINTS + 1), "step", smoothing=False)[0]["mode"] == "lines"
