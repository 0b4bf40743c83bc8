"""segment_stats: every per-segment statistic against float64 NumPy computed one segment at a time."""
from __future__ import annotations

import math

import numpy as np
import pytest

from instrumentation.dynamics.segment_stats import BLOCKS, MAX_PADDING, Segments, pack, segment_stats


def oracle(values: np.ndarray) -> dict[str, float]:
    """One segment, in float64, with nothing shared with the code under test but NumPy's elementary functions."""
    wide = values.astype(np.float64).reshape(-1)
    finite = wide[np.isfinite(wide)]
    return {"sum_squares": float(np.sum(wide * wide)) if wide.size else 0.0,
            "minimum": float(finite.min()) if finite.size else math.nan,
            "maximum": float(finite.max()) if finite.size else math.nan,
            "nan_count": int(np.isnan(wide).sum()), "inf_count": int(np.isinf(wide).sum())}


def packed(arrays: list[np.ndarray], dtype) -> tuple[np.ndarray, Segments]:
    segments = Segments.from_sizes([a.size for a in arrays])
    flat = np.full(segments.total, 7.0, dtype)  # what pack must overwrite, padding included
    pack([a.reshape(-1) for a in arrays], segments.pads(flat.dtype), flat)
    return flat, segments


def check(arrays: list[np.ndarray], dtype, rel: float, extremes: bool = True) -> None:
    flat, segments = packed(arrays, dtype)
    stats = segment_stats(flat, segments, extremes=extremes)
    for index, values in enumerate(arrays):
        for key, value in oracle(values).items():
            got = float(getattr(stats, key)[index])
            if key in ("minimum", "maximum") and not extremes:
                assert math.isnan(got), (index, key)
            elif math.isnan(value):
                assert math.isnan(got), (index, key, got)
            else:
                assert got == pytest.approx(value, rel=rel, abs=0), (index, key)


def split(flat: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(sizes)[:-1]) if sizes else []


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("sizes", [[7, 1, 300, 2], [0, 5, 0, 0, 9, 0], [0], [0, 0], [], [4097], [512, 1024], [512, 0],
                                   [3, 511, 513], [5000, 10, 0, 7]])
def test_finite_segments_of_any_size(dtype, sizes):
    rng = np.random.default_rng(len(sizes))
    flat = (rng.standard_normal(sum(sizes)) * 3).astype(dtype)
    check(split(flat, sizes), dtype, rel=1e-5)


def test_float16_in_a_float32_buffer():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 4, 5)).astype(np.float16), rng.standard_normal((2, 200)).astype(np.float32),
              np.zeros((0, 4), np.float32), rng.standard_normal(()).astype(np.float32).reshape(1)]
    check(arrays, np.float32, rel=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nan_and_infinities_are_counted_and_left_out_of_min_max(dtype):
    sizes = [6, 4, 3, 5, 2, 0, 3]
    arrays = split(np.arange(1, sum(sizes) + 1).astype(dtype), sizes)
    arrays[0][[1, 3]] = np.nan  # two NaN
    arrays[1][1] = np.inf
    arrays[2][:] = [-np.inf, np.nan, np.inf]  # nothing finite
    arrays[4][1] = -np.inf
    check(arrays, dtype, rel=1e-6)
    stats = segment_stats(*packed(arrays, dtype))
    assert stats.nan_count.tolist() == [2, 0, 1, 0, 0, 0, 0] and stats.inf_count.tolist() == [0, 1, 2, 0, 1, 0, 0]
    assert math.isnan(stats.sum_squares[2]) and math.isinf(stats.sum_squares[1]) and stats.sum_squares[5] == 0


def test_float32_squares_that_overflow_give_the_float64_norm():
    flat, segments = packed([np.array([3e19, -4e19], np.float32), np.array([1.0, 2.0], np.float32)], np.float32)
    stats = segment_stats(flat, segments)
    assert math.sqrt(stats.sum_squares[0]) == pytest.approx(5e19, rel=1e-6)
    assert stats.sum_squares[1] == pytest.approx(5.0) and stats.nan_count.tolist() == [0, 0]
    assert stats.inf_count.tolist() == [0, 0] and stats.minimum[0] == pytest.approx(-4e19)


def test_without_extremes_min_max_are_nan_and_the_rest_is_the_same():
    check([np.array([1.0, np.nan], np.float32), np.array([2.0, -3.0, np.inf], np.float32)], np.float32, rel=1e-6,
          extremes=False)


def test_pack_pads_with_zeros_and_leaves_the_inputs_alone():
    a, b = np.array([1.0, -2.0, 3.0], np.float32), np.array([[4.0, 5.0]], np.float64)
    flat, segments = packed([a, b], np.float64)
    block = segments.block
    assert segments.starts.tolist() == [0, block] and segments.total == 2 * block
    assert flat[:3].tolist() == [1.0, -2.0, 3.0] and flat[block:block + 2].tolist() == [4.0, 5.0]
    assert not flat[3:block].any() and not flat[block + 2:].any() and a.tolist() == [1.0, -2.0, 3.0]


@pytest.mark.parametrize("sizes, block", [([5000, 10], 512), ([3, 2], BLOCKS[-1]), ([1000] * 4 + [10] * 4, 64)])
def test_rows_are_the_longest_whose_padding_stays_small(sizes, block):
    segments = Segments.from_sizes(sizes)
    assert segments.block == block and segments.total <= max((1 + MAX_PADDING) * sum(sizes), len(sizes) * BLOCKS[-1])
    assert all(start % block == 0 for start in segments.starts.tolist())


def test_bad_input_is_named():
    segments = Segments.from_sizes([2, 2])
    total = segments.total
    for flat in (np.zeros((2, total // 2), np.float32), np.zeros(3, np.float32), np.zeros(total, np.int32)):
        with pytest.raises(ValueError, match=f"1-d float array of {total} elements"):
            segment_stats(flat, segments)
    with pytest.raises(ValueError, match="sizes must be >= 0"):
        Segments.from_sizes([3, -1])
    with pytest.raises(ValueError, match="1 arrays for 2 segments"):
        pack([np.zeros(2)], segments.pads(np.float64), np.zeros(total))
