"""board.data.dynamics and board.data.alerts on hand-written runs: the ratio matrix, binning, alerts tailing."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from board.data.alerts import AlertFilter, alert_index
from board.data.dynamics import dynamics_runs, ratio_matrix, tags_with_prefix
from board.data.store import LogdirStore
from board_helpers import write_scalars
from instrumentation.format.alerts import Alert, AlertWriter


def refreshed_store(logdir: Path) -> LogdirStore:
    store = LogdirStore(logdir)
    store.refresh()
    return store


def test_ratio_matrix_has_a_row_per_parameter_and_log10_values(tmp_path):
    steps = np.arange(10)
    write_scalars(tmp_path / "run", "update_ratio/a.weight", steps, 10.0 ** -(steps % 4 + 1))
    write_scalars(tmp_path / "run" / "more", "other", steps, steps * 1.0)
    store = refreshed_store(tmp_path)
    matrix = ratio_matrix(store, "run")
    assert matrix.names == ("a.weight",) and matrix.steps.tolist() == list(range(10))
    np.testing.assert_allclose(matrix.log10_ratios[0], -(steps % 4 + 1), rtol=1e-6)  # float32 on disk
    assert dynamics_runs(store) == ["run"]


def test_binned_columns_keep_the_value_farthest_from_the_healthy_band(tmp_path):
    steps = np.arange(12)
    values = np.full(12, 3e-3)
    values[5], values[9] = 1e2, 0.0  # an explosion in bin [4, 8) and a zero (log10 -inf) in bin [8, 12)
    write_scalars(tmp_path / "run", "update_ratio/w", steps, values)
    matrix = ratio_matrix(refreshed_store(tmp_path), "run", max_columns=3)
    assert matrix.steps_per_column == 4 and matrix.steps.tolist() == [0, 4, 8]
    assert matrix.log10_ratios[0, 0] == pytest.approx(np.log10(3e-3), rel=1e-6)
    assert matrix.log10_ratios[0, 1] == 2.0 and matrix.log10_ratios[0, 2] == -np.inf


def test_tags_with_prefix_and_suffix_name_the_layers(tmp_path):
    steps = np.arange(3)
    for tag in ("act/0/dead_fraction", "act/net.fc1/dead_fraction", "act/0/mean_abs", "act//dead_fraction"):
        write_scalars(tmp_path / "run", tag, steps, steps * 0.1)
    tags = tags_with_prefix(refreshed_store(tmp_path), "run", "act/", "/dead_fraction")
    assert tags == {"0": "act/0/dead_fraction", "net.fc1": "act/net.fc1/dead_fraction"}


def test_the_alert_index_tails_each_run_and_filters(tmp_path):
    for run in ("a", "b/rank0"):
        write_scalars(tmp_path / run, "loss", np.arange(2), np.ones(2))
    store = refreshed_store(tmp_path)
    AlertWriter(tmp_path / "a").write(Alert("dead_units", "warning", "1", "dead", step=7))
    AlertWriter(tmp_path / "b/rank0").write(Alert("nonfinite", "error", "fc", "nan", step=3))
    index = alert_index(store)
    assert index is alert_index(store)
    assert [(i.run, i.alert.step) for i in index.alerts()] == [("b/rank0", 3), ("a", 7)]
    AlertWriter(tmp_path / "a").write(Alert("exploding_gradient", "error", "w", "big", step=1))
    assert [(i.run, i.alert.kind) for i in index.alerts()][0] == ("a", "exploding_gradient")  # appended, re-sorted
    assert len(index.alerts()) == 3  # each line read once
    assert [i.alert.kind for i in index.alerts(AlertFilter(severities=("error",), runs=("a",)))] == \
        ["exploding_gradient"]
    assert [i.run for i in index.alerts(AlertFilter(kinds=("nonfinite",)))] == ["b/rank0"]
    assert index.kinds() == ["dead_units", "exploding_gradient", "nonfinite"]
