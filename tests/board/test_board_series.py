"""ScalarSeries: columns, the restart rule (steps going backwards), revisions."""
from __future__ import annotations

import numpy as np

from board.data.series import ScalarSeries


def extend(series: ScalarSeries, steps: list[int]) -> None:
    array = np.array(steps, np.int64)
    series.extend(array, array * 10.0, array * 0.5)


def test_appends_keep_every_point_in_order() -> None:
    series = ScalarSeries()
    extend(series, [0, 1, 2])
    extend(series, [5, 9])
    columns = series.columns()
    assert columns.steps.tolist() == [0, 1, 2, 5, 9]
    assert columns.wall_times.tolist() == [0.0, 10.0, 20.0, 50.0, 90.0]
    assert columns.values.tolist() == [0.0, 0.5, 1.0, 2.5, 4.5]
    assert (series.revision, series.superseded, series.last_step) == (0, 0, 9)


def test_restart_supersedes_points_at_and_after_the_new_step() -> None:
    series = ScalarSeries()
    extend(series, [0, 10, 20, 30, 40])
    extend(series, [20, 25])  # restarted from a checkpoint at step 20
    columns = series.columns()
    assert columns.steps.tolist() == [0, 10, 20, 25]
    assert columns.wall_times.tolist() == [0.0, 100.0, 200.0, 250.0]
    assert (series.revision, series.superseded) == (1, 3)


def test_restart_inside_one_batch_and_duplicate_step() -> None:
    series = ScalarSeries()
    extend(series, [0, 1, 2, 3, 1, 2, 2])
    assert series.columns().steps.tolist() == [0, 1, 2]
    assert series.superseded == 4  # 1,2,3 by the restart at 1, then the first 2 by the repeated 2
    assert series.revision == 2


def test_restart_to_before_everything_empties_then_refills() -> None:
    series = ScalarSeries()
    extend(series, [5, 6])
    extend(series, [0])
    assert series.columns().steps.tolist() == [0]
    assert len(series) == 1


def test_nan_and_inf_values_are_kept() -> None:
    series = ScalarSeries()
    series.extend(np.array([1, 2, 3]), np.zeros(3), np.array([np.nan, np.inf, -np.inf]))
    values = series.columns().values
    assert np.isnan(values[0]) and values[1] == np.inf and values[2] == -np.inf
