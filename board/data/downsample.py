"""Display-only downsampling that keeps the min/max envelope (tsdownsample's MinMaxLTTB)."""
from __future__ import annotations

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

DEFAULT_POINTS = 2000
_DOWNSAMPLER = MinMaxLTTBDownsampler()


def envelope_indices(x: np.ndarray, y: np.ndarray, n_out: int = DEFAULT_POINTS) -> np.ndarray:
    """Sorted indices of at most ~`n_out` + 2 points of (x, y) that keep its shape, spikes and extremes.

    `x` must be non-decreasing and `y` finite. MinMaxLTTB keeps each bucket's visually important points;
    the global minimum and maximum (and the first and last point) are always added, so no window ever
    loses its extreme values.
    """
    n = len(y)
    if n <= n_out:
        return np.arange(n)
    picked = _DOWNSAMPLER.downsample(x, y, n_out=max(n_out, 3)).astype(np.int64)
    extremes = np.array([0, n - 1, int(np.argmin(y)), int(np.argmax(y))], np.int64)
    return np.union1d(picked, extremes)
