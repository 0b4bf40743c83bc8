"""What the HParams, PR-curve and Histograms pages leave out, and say they leave out: missing hyperparameters are no
place on an axis, booleans logged two ways are one, PR thresholds with nothing predicted positive are not drawn, and
NaN/Inf values of a histogram are counted in words. Files written by the real SummaryWriter; oracles by hand."""
from __future__ import annotations

import math

import numpy as np

from board.components.hparams_figures import parallel_coordinates
from board.components.histogram_figure import distribution_figure, nonfinite_note, ridgeline_figure
from board.data.histograms import left_out, percentiles
from board.data.hparams_table import hparams_table
from board.data.media import pr_curve_points
from board.data.pr_drawn import drawn_curve
from board.data.store import LogdirStore
from instrumentation import SummaryWriter


def _store(logdir) -> LogdirStore:
    store = LogdirStore(logdir)
    store.refresh()
    return store


def test_a_missing_hyperparameter_has_no_place_and_booleans_are_one_category(tmp_path):
    for run, hparams in (("a", {"lr": 0.1, "dropout": 0.5, "augment": True}), ("b", {"lr": 0.2, "augment": 1.0}),
                         ("c", {"lr": 0.3, "augment": False}), ("d", {"lr": 0.4, "augment": 0.0})):
        with SummaryWriter(tmp_path / run) as writer:
            writer.add_hparams(hparams, {"hparam/acc": 0.5}, run_name=".")
    table = hparams_table(_store(tmp_path))
    by_run = {row.run: row.hparams for row in table.rows}
    assert [by_run[run]["augment"] for run in "abcd"] == [True, True, False, False]
    assert all(type(by_run[run]["augment"]) is bool for run in "abcd")
    assert "dropout" not in by_run["b"]
    figure = parallel_coordinates(table, None)
    axes = figure["layout"]["xaxis"]["ticktext"]
    labels = {a["text"] for a in figure["layout"]["annotations"]}
    assert {"False", "True"} <= labels and "1.0" not in labels and "None" not in labels
    dropout = axes.index("dropout")
    lines = figure["data"][0]
    y = np.asarray(lines["y"], float).reshape(len(table.rows), len(axes) + 1)
    runs = [lines["text"][i * (len(axes) + 1)] for i in range(len(table.rows))]
    placed = {run: y[i, dropout] for i, run in enumerate(runs)}
    assert placed["a"] == 0.5 and all(math.isnan(placed[run]) for run in "bcd")  # only "a" logged dropout


def test_pr_thresholds_with_nothing_predicted_positive_are_not_drawn(tmp_path):
    labels = np.array([1, 0, 1, 1, 0, 0, 1, 0])
    predictions = np.array([0.9, 0.1, 0.6, 0.35, 0.2, 0.55, 0.45, 0.05])
    with SummaryWriter(tmp_path / "run") as writer:
        writer.add_pr_curve("pr", labels, predictions, 0, num_thresholds=11)
    point = pr_curve_points(_store(tmp_path), "run", "pr")[0]
    curve = drawn_curve(point)
    # by hand: a prediction p counts at threshold i/10 when floor(p * 10) >= i; the highest bucket is 9 (0.9)
    assert curve.left_out == 1 and len(curve.thresholds) == 10
    predicted = curve.rows["true_positives"] + curve.rows["false_positives"]
    assert predicted.min() > 0 and predicted.tolist()[0] == 8
    assert not np.any((curve.rows["precision"] == 0) & (curve.rows["recall"] == 0))
    assert curve.rows["true_positives"].tolist()[-1] == 1  # threshold 0.9: only the 0.9, a positive


def test_a_histogram_with_nan_and_inf_draws_its_finite_values_and_counts_what_it_left_out(tmp_path):
    values = np.r_[np.linspace(-1, 1, 95), [np.nan] * 3, [np.inf, -np.inf]]
    with SummaryWriter(tmp_path / "run") as writer:
        writer.add_histogram("w", np.linspace(-1, 1, 100), 0)
        writer.add_histogram("w", values, 1)
        writer.add_histogram("w", np.full(10, np.nan), 2)
    points = _store(tmp_path).histograms("run", "w")
    assert [left_out(point) for point in points] == [0, 5, 10]
    note = nonfinite_note(points)
    assert note == "15 NaN/Inf values left out (2 of 3 steps, first 1); 1 histogram(s) with no finite value not drawn"
    ridges = ridgeline_figure("w", "run", points)
    assert {trace["name"] for trace in ridges["data"]} == {"step 0", "step 1"}
    assert "15 NaN/Inf values left out" in ridges["layout"]["title"]["text"]
    bands = percentiles(points[1])
    # the finite values' range to a bucket (min/max are NaN on disk: the buckets' edges bound it), not NaN
    assert np.all(np.isfinite(bands)) and -1.01 < bands[0] < -0.9 and 0.9 < bands[-1] < 1.01
    median = distribution_figure("w", "run", points)["data"][-1]
    assert median["y"][2] is None and median["y"][1] is not None


def test_histograms_taken_every_k_steps_are_bars_at_their_steps_not_bands_across_the_others(tmp_path):
    rng = np.random.default_rng(0)
    with SummaryWriter(tmp_path / "run") as writer:
        for step in (0, 100, 200):
            writer.add_histogram("w", rng.standard_normal(300), step)
    figure = distribution_figure("w", "run", _store(tmp_path).histograms("run", "w"))
    assert not any("fill" in trace for trace in figure["data"])
    bars = [trace for trace in figure["data"] if trace["name"].startswith("p")]
    assert len(bars) == 4 and all(trace["x"] == [0, 0, None, 100, 100, None, 200, 200, None] for trace in bars)
    faint, median = figure["data"][-2:]
    assert median["name"] == "median" and median["x"] == [0, None, 100, None, 200]
    assert faint["line"]["dash"] == "dot" and faint["hoverinfo"] == "skip"
