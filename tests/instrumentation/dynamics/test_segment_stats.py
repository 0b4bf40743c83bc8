"""segment_stats: every per-segment statistic against float64 NumPy computed one segment at a time."""
from __future__ import annotations

import math

import numpy as np
import pytest

from instrumentation.dynamics.segment_stats import Segments, segment_stats


def oracle(values: np.ndarray) -> dict[str, float]:
    """One segment, in float64, with nothing shared with the code under test but NumPy's elementary functions."""
    wide = values.astype(np.float64)
    finite = wide[np.isfinite(wide)]
    return {"sum_squares": float(np.sum(wide * wide)) if wide.size else 0.0,
            "minimum": float(finite.min()) if finite.size else math.nan,
            "maximum": float(finite.max()) if finite.size else math.nan,
            "nan_count": int(np.isnan(wide).sum()), "inf_count": int(np.isinf(wide).sum())}


def check(flat: np.ndarray, sizes: list[int], rel: float, extremes: bool = True) -> None:
    stats = segment_stats(flat, Segments.from_sizes(sizes), extremes=extremes)
    start = 0
    for index, size in enumerate(sizes):
        expected = oracle(flat[start:start + size])
        start += size
        for key, value in expected.items():
            got = float(getattr(stats, key)[index])
            if key in ("minimum", "maximum") and not extremes:
                assert math.isnan(got), (index, key)
            elif math.isnan(value):
                assert math.isnan(got), (index, key, got)
            else:
                assert got == pytest.approx(value, rel=rel, abs=0), (index, key)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("sizes", [[7, 1, 300, 2], [0, 5, 0, 0, 9, 0], [0], [0, 0], [], [4097]])
def test_finite_segments_of_any_size(dtype, sizes):
    rng = np.random.default_rng(len(sizes))
    flat = (rng.standard_normal(sum(sizes)) * 3).astype(dtype)
    check(flat, sizes, rel=1e-3 if dtype == np.float16 else 1e-5)  # float16 squares are float16


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nan_and_infinities_are_counted_and_left_out_of_min_max(dtype):
    sizes = [6, 4, 3, 5, 2, 0, 3]
    flat = np.arange(1, sum(sizes) + 1).astype(dtype)  # segment starts: 0, 6, 10, 13, 18, 20, 20
    flat[[1, 3]] = np.nan  # segment 0: two NaN
    flat[7] = np.inf  # segment 1: +Inf
    flat[[10, 11, 12]] = [-np.inf, np.nan, np.inf]  # segment 2: nothing finite
    flat[19] = -np.inf  # segment 4
    check(flat, sizes, rel=1e-3 if dtype == np.float16 else 1e-6)
    stats = segment_stats(flat, Segments.from_sizes(sizes))
    assert stats.nan_count.tolist() == [2, 0, 1, 0, 0, 0, 0] and stats.inf_count.tolist() == [0, 1, 2, 0, 1, 0, 0]
    assert math.isnan(stats.sum_squares[2]) and math.isinf(stats.sum_squares[1]) and stats.sum_squares[5] == 0


def test_float32_squares_that_overflow_give_the_float64_norm():
    flat = np.array([3e19, -4e19, 1.0, 2.0], np.float32)
    stats = segment_stats(flat, Segments.from_sizes([2, 2]))
    assert math.sqrt(stats.sum_squares[0]) == pytest.approx(5e19, rel=1e-6)
    assert stats.sum_squares[1] == pytest.approx(5.0) and stats.nan_count.tolist() == [0, 0]
    assert stats.inf_count.tolist() == [0, 0] and stats.minimum[0] == pytest.approx(-4e19)


def test_without_extremes_min_max_are_nan_and_the_rest_is_the_same():
    flat = np.array([1.0, np.nan, 2.0, -3.0, np.inf], np.float32)
    check(flat, [2, 3], rel=1e-6, extremes=False)


def test_scratch_is_used_and_the_input_is_left_alone():
    flat = np.array([1.0, -2.0, 3.0], np.float32)
    scratch = np.zeros(3, np.float32)
    segment_stats(flat, Segments.from_sizes([1, 2]), scratch)
    assert scratch.tolist() == [1.0, 4.0, 9.0] and flat.tolist() == [1.0, -2.0, 3.0]


def test_bad_input_is_named():
    segments = Segments.from_sizes([2, 2])
    for flat in (np.zeros((2, 2), np.float32), np.zeros(3, np.float32), np.zeros(4, np.int32)):
        with pytest.raises(ValueError, match="1-d float array of 4 elements"):
            segment_stats(flat, segments)
    with pytest.raises(ValueError, match="sizes must be >= 0"):
        Segments.from_sizes([3, -1])
