"""Histogram buckets: counts equal np.histogram over TensorFlow's edges (float64) for every input kind and bin rule."""
from __future__ import annotations

import numpy as np
import pytest

from instrumentation.summary.bucketing import histogram_from_values, tensorflow_edges

_RNG = np.random.default_rng(3)
_CASES = {
    "normal": _RNG.normal(size=20_000).astype(np.float32),
    "constant": np.full(500, 0.3, np.float32),
    "tiny": (_RNG.normal(size=5000) * 1e-30).astype(np.float32),
    "huge": (_RNG.normal(size=5000) * 1e30).astype(np.float32),
    "exactly_on_edges": np.concatenate([tensorflow_edges(), np.nextafter(tensorflow_edges(), 0)]).astype(np.float32),
    "subnormal_and_zero": np.array([1e-45, -1e-45, 1e-40, 0.0, -0.0], np.float32),
    "float16": _RNG.normal(size=5000).astype(np.float16),
    "float16_wide": np.array([65504, -65504, 6e-8, -6e-8, 0, 1, 1.1], np.float16),
    "float64": _RNG.normal(size=3000),
    "int": _RNG.integers(-50, 50, 3000),
}


def _reference_counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """np.histogram in float64, with values outside the edges moved into the outermost buckets."""
    wide = values.astype(np.float64)
    counts, _ = np.histogram(np.clip(wide, edges[0], edges[-1]), bins=edges)
    return counts.astype(np.float64)


@pytest.mark.parametrize("case", sorted(_CASES))
@pytest.mark.parametrize("may_reorder", [False, True])
def test_tensorflow_bucket_counts_match_numpy_in_float64(case, may_reorder):
    values = _CASES[case]
    original = values.copy()
    histogram = histogram_from_values(values.copy() if may_reorder else values, may_reorder=may_reorder)
    reference = _reference_counts(values, tensorflow_edges())
    nonzero = np.flatnonzero(reference)
    np.testing.assert_array_equal(histogram.counts, reference[nonzero[0]:nonzero[-1] + 1])
    np.testing.assert_array_equal(histogram.edges, tensorflow_edges()[nonzero[0]:nonzero[-1] + 2])
    np.testing.assert_array_equal(values, original)  # without may_reorder the input is left alone
    wide = values.astype(np.float64)
    assert (histogram.minimum, histogram.maximum, histogram.num) == (wide.min(), wide.max(), wide.size)
    # float64 rounding of a different summation order: bounded by the sum of magnitudes
    assert histogram.sum == pytest.approx(wide.sum(), abs=1e-12 * float(np.abs(wide).sum()) + 1e-300)
    assert histogram.sum_squares == pytest.approx(float(np.dot(wide, wide)), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("case", ["normal", "constant", "float16", "huge"])
def test_uniform_bins_of_narrow_floats_match_numpy(case):
    values = _CASES[case]
    histogram = histogram_from_values(values.copy(), bins=9, may_reorder=True)
    wide = values.astype(np.float64)
    counts, edges = np.histogram(wide, bins=9)
    np.testing.assert_array_equal(histogram.counts, counts)
    np.testing.assert_array_equal(histogram.edges, edges)


def test_non_finite_values_are_left_out_of_the_buckets_only():
    values = np.array([1.0, np.inf, -np.inf, 2.0, np.nan, 1e-12], np.float32)
    histogram = histogram_from_values(values, may_reorder=True)
    assert histogram.counts.sum() == 3 and histogram.num == 6
    assert np.isnan(histogram.minimum) and np.isnan(histogram.sum)
    infinite = histogram_from_values(np.array([1.0, np.inf, -2.0], np.float32))
    assert (infinite.minimum, infinite.maximum, infinite.counts.sum()) == (-2.0, np.inf, 2)
