"""What the Dynamics page draws of a thinned series: cells and lines only at measured steps, the interval in words."""
from __future__ import annotations

import numpy as np

from board.components.dynamics_figures import StepMark, layer_lines, ratio_heatmap, series_traces
from board.data.dynamics import measured_steps, ratio_matrix, sampling_phrases, sampling_text
from board.data.store import LogdirStore
from board.data.views import SmoothingCache
from board.data.dynamics import layer_views
from board_helpers import write_scalars

THINNED = np.r_[np.arange(32), 47, 48, 49, 64, 128, 192, 256]  # warm-up at every step, a burst, then every 64


def _store(tmp_path):
    write_scalars(tmp_path / "run", "update_ratio/w", THINNED, np.full(len(THINNED), 3e-3))
    write_scalars(tmp_path / "run", "grad_norm/w", THINNED, np.linspace(1, 2, len(THINNED)))
    store = LogdirStore(tmp_path)
    store.refresh()
    return store


def test_no_heatmap_cell_spans_steps_that_were_not_measured(tmp_path):
    matrix = ratio_matrix(_store(tmp_path), "run")
    assert matrix.steps_per_column == 1
    filled = matrix.measured & ~np.isnan(matrix.log10_ratios[0])
    # each measured column is exactly its own step; every stretch of missing steps is one blank (NaN) column
    lefts, rights = matrix.edges[:-1], matrix.edges[1:]
    assert np.all(lefts[filled] == matrix.steps[filled] - 0.5) and np.all(rights[filled] == matrix.steps[filled] + 0.5)
    assert matrix.steps[matrix.measured].tolist() == THINNED.tolist()
    blanks = [(lo + 0.5, hi - 0.5) for lo, hi, measured in zip(lefts, rights, matrix.measured) if not measured]
    assert blanks == [(32, 46), (50, 63), (65, 127), (129, 191), (193, 255)]
    assert np.all(np.isnan(matrix.log10_ratios[0][~matrix.measured]))
    trace = ratio_heatmap(matrix)["data"][0]
    assert len(trace["x"]) == len(trace["z"][0]) + 1  # edges: Plotly draws the cells between them


def test_binned_columns_cover_only_bins_that_hold_a_measurement(tmp_path):
    matrix = ratio_matrix(_store(tmp_path), "run", max_columns=64)  # 257 steps -> 5 steps per column
    assert matrix.steps_per_column == 5
    spans = list(zip(matrix.edges[:-1][matrix.measured], matrix.edges[1:][matrix.measured]))
    for step in THINNED:
        assert any(lo < step < hi for lo, hi in spans)
    assert all(any(lo < step < hi for step in THINNED) for lo, hi in spans)  # no bin without a measurement


def test_the_interval_is_said_in_words_from_the_measured_steps(tmp_path):
    steps = measured_steps(_store(tmp_path), "run")
    assert steps.tolist() == THINNED.tolist()
    assert sampling_phrases(steps) == ["every step from step 0 to 31", "every step from step 47 to 49",
                                       "every 64 steps from step 64 to 256"]
    assert sampling_text(steps).startswith("statistics measured every step from step 0 to 31, then every step from")
    assert sampling_phrases(np.array([0, 1, 2, 3, 40, 90])) == ["every step from step 0 to 3", "steps 40, 90"]
    assert sampling_text(np.empty(0, np.int64)) == "no step measured yet"


def test_lines_have_markers_and_break_across_unmeasured_steps():
    x = np.array([0, 1, 2, 10, 11])
    faint, line = series_traces("w", x, np.array([1.0, 2, 3, 4, 5]), "#000", "")
    assert line["mode"] == "lines+markers"
    assert line["x"] == [0, 1, 2, None, 10, 11] and line["y"] == [1.0, 2.0, 3.0, None, 4.0, 5.0]
    assert faint["line"]["dash"] == "dot" and faint["opacity"] < 0.5 and faint["hoverinfo"] == "skip"
    assert len(series_traces("w", np.arange(4), np.ones(4), "#000", "")) == 1  # every step measured: no connector


def test_a_marked_alert_rings_its_subjects_value_and_hover_does_not_repeat_the_name(tmp_path):
    store = _store(tmp_path)
    views = layer_views(store, SmoothingCache(), "run", "update_ratio/")
    figure = layer_lines("t", views, "update_ratio/", log_y=True, mark=StepMark(48, "exploding_gradient", "w"),
                         mark_subject=True)
    marker = figure["data"][-1]
    assert marker["name"] == "alert" and marker["x"] == [48] and marker["y"] == [float(np.float32(3e-3))]
    assert any(shape["x0"] == 48 for shape in figure["layout"]["shapes"])
    assert all("w" not in trace.get("hovertemplate", "").split("<br>")[0] for trace in figure["data"][:-1])


def test_an_alert_at_a_step_with_no_value_is_marked_at_the_charts_bottom(tmp_path):
    from board.components.dynamics_figures import loss_figure
    from board.data.views import scalar_view

    write_scalars(tmp_path / "run", "train/loss", np.arange(10), np.linspace(2.0, 1.0, 10))
    store = LogdirStore(tmp_path)
    store.refresh()
    view = scalar_view(store, SmoothingCache(), "run", "train/loss")
    marker = loss_figure(view, StepMark(12, "nonfinite", "standardize"), mark_loss=True)["data"][-1]
    assert marker["x"] == [12] and marker["y"] == [1.0] and marker["marker"]["symbol"] == "triangle-up"
