"""``engine.cuda.statistics``: the per-segment statistics watch() needs, for a CuPy buffer, in one kernel launch."""
from __future__ import annotations

from typing import Any

import numpy as np


def segment_statistics(flat: Any, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    """(sum of squares in float64, finite minimum, finite maximum, NaN count, ±Inf count) per segment
    ``flat[starts[i]:starts[i] + sizes[i]]`` of a 1-d float32/float64 CuPy array, as NumPy arrays: one launch of
    engine/backend/cuda/kernels/statistics.cu and one device-to-host copy."""
    from engine.backend.cuda.kernels import segment_statistics_host  # NOTE: lazy: needs CuPy

    return segment_statistics_host(flat, starts, sizes)


def dead_unit_counts(activations: Any) -> np.ndarray:
    """Per unit (axis 1), how many values of a CuPy activation array are not > 0, over the batch and every
    position, as a NumPy int64 array: a unit is dead when its count is ``activations.size // units``."""
    from engine.backend.cuda.kernels import dead_unit_counts as on_device  # NOTE: lazy: needs CuPy

    return on_device(activations).get()
