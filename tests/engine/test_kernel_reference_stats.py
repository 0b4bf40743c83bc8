"""The references of the statistics kernels against watch()'s CPU code (segment_stats, dead_fraction)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backend import kernel_reference as ref
from instrumentation.dynamics.activations import dead_fraction
from instrumentation.dynamics.segment_stats import Segments, pack, segment_stats


def _packed(arrays, dtype):
    segments = Segments.from_sizes([a.size for a in arrays])
    flat = pack(arrays, segments.pads(np.dtype(dtype)), np.empty(segments.total, dtype))
    return flat, segments


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_segment_statistics_match_segment_stats(dtype):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n).astype(dtype) for n in (300, 0, 1, 4097, 17)]
    arrays[3][[5, 9]] = np.nan
    arrays[3][11] = np.inf
    arrays[4][:] = -np.inf
    flat, segments = _packed(arrays, dtype)
    expected = segment_stats(flat, segments)
    got = ref.segment_statistics(flat, segments.starts, segments.sizes)
    np.testing.assert_allclose(got[0], expected.sum_squares, rtol=1e-6 if dtype == np.float32 else 1e-13)
    for mine, theirs in zip(got[1:], expected[1:5]):
        np.testing.assert_array_equal(mine, theirs)
    assert got[1].dtype == dtype and got[3].dtype == np.int64
    assert got[3].tolist() == [0, 0, 0, 2, 0] and got[4].tolist() == [0, 0, 0, 1, 17]
    assert got[0][1] == 0 and np.isnan(got[1][1]) and np.isnan(got[1][4])  # empty; none finite


def test_segment_statistics_float32_squares_that_overflow_stay_finite():
    arrays = [np.array([3e20, -3e20], np.float32), np.array([1.0], np.float32)]
    flat, segments = _packed(arrays, np.float32)
    expected = segment_stats(flat, segments)
    got = ref.segment_statistics(flat, segments.starts, segments.sizes)
    assert expected.recounted == 1 and np.isfinite(got[0]).all()
    np.testing.assert_allclose(got[0], expected.sum_squares, rtol=1e-12)


def test_segment_statistics_takes_boundaries_and_rejects_segments_outside():
    flat = np.arange(6, dtype=np.float64)
    sum_sq, minimum, maximum, _, _ = ref.segment_statistics(flat, np.array([0, 2, 2, 6]))
    assert sum_sq.tolist() == [1.0, 0.0, 4 + 9 + 16 + 25] and minimum[2] == 2 and maximum[0] == 1
    with pytest.raises(ValueError, match="inside"):
        ref.segment_statistics(flat, np.array([4]), np.array([3]))


@pytest.mark.parametrize("shape", [(64, 10), (8, 4, 3, 5), (1, 3)])
def test_dead_unit_counts_decide_dead_fraction(shape):
    rng = np.random.default_rng(1)
    output = np.maximum(rng.standard_normal(shape) - 1.0, 0)
    output[:, 1] = 0  # one unit never fires
    if len(shape) == 2:
        output[0, 2] = np.nan  # NaN is not positive
    counts = ref.dead_unit_counts(output)
    per_unit = output.size // shape[1]
    assert counts[1] == per_unit
    assert 1.0 - np.count_nonzero(counts < per_unit) / counts.size == pytest.approx(dead_fraction(output))
    expected = [np.count_nonzero(~(np.moveaxis(output, 1, 0)[u] > 0)) for u in range(shape[1])]
    assert counts.tolist() == expected
