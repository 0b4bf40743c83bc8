"""Per-segment statistics of one flat float buffer: sums of squares, finite min/max, NaN/Inf counts, in a few passes."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True, slots=True)
class Segments:
    """Segment ``i`` of a flat buffer is ``flat[offsets[i]:offsets[i + 1]]`` (CSR-style offsets, zero-size segments
    allowed). Built once per layout: what every call needs (the starts of the non-empty segments, the arrays of a
    segment count returned when nothing was found) is kept here, read-only."""

    offsets: np.ndarray  # int64, len = segments + 1, non-decreasing, offsets[0] == 0
    total: int  # offsets[-1]: the elements of the flat buffer
    starts: np.ndarray  # offsets of the non-empty segments: their reduceat indices
    nonempty: np.ndarray | None  # indices of the non-empty segments; None when none is empty
    zero_counts: np.ndarray  # int64 zeros, one per segment
    no_values: np.ndarray  # float64 NaNs, one per segment

    @classmethod
    def from_sizes(cls, sizes: list[int]) -> Segments:
        if any(size < 0 for size in sizes):
            raise ValueError(f"segment sizes must be >= 0, got {sizes}")
        offsets = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        sized = np.asarray(sizes, np.int64) > 0
        zero_counts, no_values = np.zeros(len(sizes), np.int64), np.full(len(sizes), np.nan)
        for array in (offsets, zero_counts, no_values):
            array.flags.writeable = False
        return cls(offsets, int(offsets[-1]), offsets[:-1][sized], None if sized.all() else np.flatnonzero(sized), zero_counts, no_values)

    @property
    def count(self) -> int:
        return len(self.offsets) - 1


class SegmentStats(NamedTuple):
    """Per segment, arrays of ``Segments.count`` values: ``sum_squares`` (NaN if a NaN is in the segment, else inf if
    an inf is; 0 when empty), ``minimum``/``maximum`` of the finite values (NaN when there is none, or when extremes
    were not asked for), ``nan_count`` and ``inf_count`` (±Inf). Float arrays are in the buffer's dtype when every
    segment is finite; a segment with a non-finite sum of squares is recounted in float64 (then exact also where
    only float32 squares overflowed). The arrays may be shared and read-only: copy before writing."""

    sum_squares: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    nan_count: np.ndarray
    inf_count: np.ndarray


def segment_stats(flat: np.ndarray, segments: Segments, scratch: np.ndarray | None = None, *,
                  extremes: bool = True) -> SegmentStats:
    """Statistics of every segment of ``flat`` (a 1-d float array of ``segments.total`` elements).

    Whatever the number of segments, the common case is five NumPy calls: one square into ``scratch`` (a float
    array of ``flat``'s size and dtype; allocated when None), one ``add.reduceat``, with ``extremes`` one
    ``minimum.reduceat`` and one ``maximum.reduceat``, and the sum of the sums. Non-finite values need no pass of
    their own: a segment whose sum of squares is finite holds none; only the others (rare) are read again, one by
    one. This is the contract a GPU kernel would implement in one pass (flat buffer + offsets → per-segment stats).
    """
    if flat.ndim != 1 or flat.dtype.kind != "f" or flat.size != segments.total:
        raise ValueError(f"segment_stats: flat must be a 1-d float array of {segments.total} elements, got "
                         f"{flat.dtype} {flat.shape}")
    starts, none_found = segments.starts, segments.no_values
    if not starts.size:
        return SegmentStats(np.zeros(segments.count), none_found, none_found, segments.zero_counts,
                            segments.zero_counts)
    with np.errstate(over="ignore"):  # NOTE: squares that overflow are recounted below
        squares = np.multiply(flat, flat, out=scratch)
    sum_squares = np.add.reduceat(squares, starts)
    minimum = np.minimum.reduceat(flat, starts) if extremes else none_found
    maximum = np.maximum.reduceat(flat, starts) if extremes else none_found
    if segments.nonempty is not None:  # zero-size segments: 0 and NaN there
        sum_squares = _spread(sum_squares, segments.nonempty, segments.count, 0.0)
        if extremes:
            minimum = _spread(minimum, segments.nonempty, segments.count, np.nan)
            maximum = _spread(maximum, segments.nonempty, segments.count, np.nan)
    if math.isfinite(np.add.reduce(sum_squares)):
        return SegmentStats(sum_squares, minimum, maximum, segments.zero_counts, segments.zero_counts)
    return _recounted(flat, segments, sum_squares, minimum, maximum, extremes)


def _spread(values: np.ndarray, where: np.ndarray, count: int, fill: float) -> np.ndarray:
    spread = np.full(count, fill, values.dtype)
    spread[where] = values
    return spread


def _recounted(flat: np.ndarray, segments: Segments, sum_squares: np.ndarray, minimum: np.ndarray,
               maximum: np.ndarray, extremes: bool) -> SegmentStats:
    """Rare: the segments whose sum of squares is not finite (NaN/Inf, or float32 squares that overflow), read again
    one by one in float64."""
    sum_squares, minimum, maximum = (a.astype(np.float64) for a in (sum_squares, minimum, maximum))
    nan_count, inf_count = np.zeros(segments.count, np.int64), np.zeros(segments.count, np.int64)
    offsets = segments.offsets
    for index in np.flatnonzero(~np.isfinite(sum_squares)):
        wide = flat[offsets[index]:offsets[index + 1]].astype(np.float64)
        nans, infs = np.isnan(wide), np.isinf(wide)
        nan_count[index], inf_count[index] = np.count_nonzero(nans), np.count_nonzero(infs)
        sum_squares[index] = np.dot(wide, wide)  # NaN or inf when those are present; finite when only squares overflowed
        if extremes:
            finite = wide[~(nans | infs)]
            minimum[index], maximum[index] = (finite.min(), finite.max()) if finite.size else (np.nan, np.nan)
    return SegmentStats(sum_squares, minimum, maximum, nan_count, inf_count)
