"""activation_stats against float64 NumPy: mean |a| (BLAS asum where it applies), dead and saturated fractions."""
from __future__ import annotations

import numpy as np
import pytest

from instrumentation.dynamics.activations import activation_stats


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("kind", ["Linear", "Conv2d", "ReLU", "LeakyReLU", "GELU", "Sigmoid", "Tanh"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "empty"])
def test_statistics_equal_float64_numpy(kind, dtype, layout):
    rng = np.random.default_rng(0)
    shape = (0, 8) if layout == "empty" else (16, 6, 5, 5) if kind == "Conv2d" else (32, 24)
    output = rng.standard_normal(shape)
    if kind == "ReLU":
        output = np.maximum(output, 0)
        output[:, 3] = 0.0  # a unit that never fires
    elif kind == "Sigmoid":
        output = 1 / (1 + np.exp(-4 * output))
    elif kind == "Tanh":
        output = np.tanh(3 * output)
    array = output.astype(dtype)
    if layout == "transposed":
        array = np.ascontiguousarray(array.T).T  # same values, not C-contiguous
    stats = activation_stats("layer", kind, array)
    reference = array.astype(np.float64)
    expected = float(np.abs(reference).mean()) if reference.size else 0.0
    assert stats.mean_abs == pytest.approx(expected, rel=1e-5 if dtype != np.float16 else 1e-3, abs=1e-12)
    if kind in ("ReLU", "LeakyReLU", "GELU") and reference.size:
        alive = (reference > 0).any(axis=tuple(i for i in range(reference.ndim) if i != 1))
        assert stats.dead_fraction == pytest.approx(1 - alive.mean())
    if kind in ("Sigmoid", "Tanh") and reference.size:
        low, high = (0.0, 1.0) if kind == "Sigmoid" else (-1.0, 1.0)
        margin = 0.01 * (high - low)  # NOTE: the bounds compare in the array's dtype (float16: 0.98 is 0.97998)
        below, above = (float(np.asarray(bound, dtype)) for bound in (low + margin, high - margin))
        assert stats.saturated_fraction == pytest.approx(((reference <= below) | (reference >= above)).mean(),
                                                         abs=1e-6)
