"""Display downsampling keeps every window's extremes; zoom windows come back at full resolution."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from board.data.downsample import envelope_indices
from board.data.store import LogdirStore
from board.data.views import SmoothingCache, scalar_view
from board_helpers import write_scalars


@pytest.mark.parametrize("seed", range(5))
def test_every_window_keeps_its_global_min_and_max(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = np.cumsum(rng.normal(size=200_000))
    y[rng.integers(0, len(y), 5)] += rng.normal(scale=1e4, size=5)  # isolated spikes
    x = np.arange(len(y))
    for _ in range(20):
        lo = int(rng.integers(0, len(y) - 10_000))
        hi = lo + int(rng.integers(5_000, len(y) - lo))
        picked = envelope_indices(x[lo:hi], y[lo:hi], 500)
        assert len(picked) <= 504
        assert np.all(np.diff(picked) > 0)
        assert y[lo:hi][picked].max() == y[lo:hi].max()
        assert y[lo:hi][picked].min() == y[lo:hi].min()
        assert picked[0] == 0 and picked[-1] == hi - lo - 1


def test_short_series_is_returned_whole() -> None:
    assert envelope_indices(np.arange(10), np.zeros(10), 500).tolist() == list(range(10))


def test_zoom_window_returns_every_point_inside_and_marks_non_finite(tmp_path: Path) -> None:
    steps = np.arange(0, 50_000)
    values = np.sin(steps / 100.0)
    values[20_100] = np.nan
    values[20_200] = np.inf
    write_scalars(tmp_path / "run", "wave", steps, values)
    store = LogdirStore(tmp_path)
    store.refresh()
    cache = SmoothingCache()
    whole = scalar_view(store, cache, "run", "wave", max_points=1000)
    assert len(whole.x) <= 1004 and whole.window_points == 50_000
    zoomed = scalar_view(store, cache, "run", "wave", window=(20_000, 20_400), max_points=1000)
    finite_steps = [s for s in range(19_999, 20_402) if s not in (20_100, 20_200)]
    assert zoomed.x.tolist() == finite_steps  # every point, plus one neighbour each side
    assert zoomed.nonfinite_x.tolist() == [20_100, 20_200]
    assert np.isnan(zoomed.nonfinite_values[0]) and zoomed.nonfinite_values[1] == np.inf
    smoothed = scalar_view(store, cache, "run", "wave", window=(20_000, 20_400), smoothing=0.9)
    assert smoothed.smoothed is not None and len(smoothed.smoothed) == len(smoothed.x)
    relative = scalar_view(store, cache, "run", "wave", x_axis="relative", window=(100.0, 200.0))
    assert relative.x[0] == 99.0 and relative.x[-1] == 201.0
