"""Measured vs not measured on Scalars: the gaps come from the steps; a thinned series is drawn with markers and no
line across its gaps, a series logged every step keeps its line."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from board.components.scalar_figure import run_traces
from board.data.measured import is_thinned, sampling_note, unmeasured_before
from board.data.store import LogdirStore
from board.data.views import SmoothingCache, scalar_view
from instrumentation import SummaryWriter

# what watch() writes once the budget thins it: every step, then every 16, and a last sample at close()
THINNED = np.array([*range(32), *range(48, 161, 16), 171])


def test_gaps_are_where_steps_between_two_points_were_not_measured() -> None:
    gaps = unmeasured_before(THINNED, np.arange(len(THINNED)))
    assert THINNED[gaps].tolist() == [48, 64, 80, 96, 112, 128, 144, 160, 171]
    every_step = np.arange(10_000)
    picked = np.array([0, 17, 4000, 9999])  # a downsampled view of a fully measured series
    assert not unmeasured_before(every_step, picked).any()
    assert unmeasured_before(THINNED, np.array([31, 32])).tolist() == [False, True]  # 31 -> 48
    assert unmeasured_before(THINNED, np.array([33])).tolist() == [True]  # against the point before it: 48 -> 64


def test_the_sampling_is_said_in_words() -> None:
    assert sampling_note(np.arange(50)) is None and not is_thinned(np.arange(50))
    assert sampling_note(THINNED) == "every 16 steps from step 48, last at step 171"
    assert sampling_note(np.arange(0, 1000, 100)) == "every 100 steps from step 0"
    assert sampling_note(np.array([45, 90])) == "at steps 45, 90"
    # a regular stretch that ends before the series does says where, and what came after it
    assert sampling_note(np.array([*range(32), 47, 60, 89])) == (
        "every step from step 0 to step 31, then at steps 47, 60, 89")
    assert sampling_note(np.array([*range(0, 100, 10), 101, 103, 110, 130, 131, 170])) == (
        "every 10 steps from step 0 to step 90, then 6 points to step 170")
    assert sampling_note(np.array([0, 5, 9, 30, 31])) == "5 points at irregular steps"


def _view(tmp_path: Path, steps: np.ndarray, smoothing: float = 0.0):
    with SummaryWriter(tmp_path / "run") as writer:
        for step in steps.tolist():
            writer.add_scalar("grad_norm/fc.weight", 1.0 + np.sin(step), step)
    store = LogdirStore(tmp_path)
    store.refresh()
    return scalar_view(store, SmoothingCache(), "run", "grad_norm/fc.weight", smoothing=smoothing)


def test_a_thinned_series_has_markers_and_no_line_across_its_gaps(tmp_path: Path) -> None:
    for smoothing in (False, True):
        view = _view(tmp_path / str(smoothing), THINNED, smoothing=0.6 if smoothing else 0.0)
        raw, smoothed, _, connector = run_traces(view, "step", smoothing=smoothing)
        drawn = smoothed if smoothing else raw
        assert "markers" in drawn["mode"] and "markers" in raw["mode"]
        x, y = drawn["x"], drawn["y"]
        assert [v for v in x if v is not None] == THINNED.tolist()  # every measured point, nothing else
        breaks = [i for i, v in enumerate(x) if v is None]
        assert [x[i + 1] for i in breaks] == [48, 64, 80, 96, 112, 128, 144, 160, 171]  # the line stops before each
        assert all(y[i] is None for i in breaks)
        assert drawn["name"] == "run · every 16 steps from step 48, last at step 171"
        # a faint dotted connector through every point, silent on hover and in the legend
        assert list(connector["x"]) == THINNED.tolist() and list(connector["y"]) == [v for v in y if v is not None]
        assert connector["line"]["dash"] == "dot" and connector["hoverinfo"] == "skip"
        assert connector["line"]["color"].startswith("rgba(") and not connector["showlegend"]


def test_a_series_logged_every_step_keeps_its_line(tmp_path: Path) -> None:
    view = _view(tmp_path, np.arange(500), smoothing=0.6)
    raw, smoothed, _, connector = run_traces(view, "step", smoothing=True)
    assert view.sampling is None and smoothed["mode"] == "lines" and raw["mode"] == "lines"
    assert len(connector["x"]) == 0
    assert None not in list(smoothed["x"]) and smoothed["name"] == "run"
