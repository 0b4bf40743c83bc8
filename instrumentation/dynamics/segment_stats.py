"""Per-segment statistics of one flat float buffer: sums of squares, finite min/max, NaN/Inf counts, in a few passes."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

BLOCKS = (512, 256, 128, 64, 32, 16)  # row lengths of the sum-of-squares pass, longest first
MAX_PADDING = 0.125  # the longest row whose zero padding adds at most this share to the buffer


@dataclass(frozen=True, slots=True)
class Segments:
    """Segment ``i`` of a flat buffer is ``flat[starts[i]:starts[i] + sizes[i]]``. Each starts at a multiple of
    ``block`` and is followed by zeros up to the next one (``pack`` writes that layout), so that every row of the
    ``(total / block, block)`` view belongs to one segment: sums of squares are then one ``np.vecdot`` of the rows
    (2x faster than a square and an ``add.reduceat`` on the digits MLP's 30k elements, 5x on 1.5M). ``block`` is the
    longest of ``BLOCKS`` whose padding adds at most ``MAX_PADDING`` to the buffer. Built once per layout, read-only."""

    starts: np.ndarray  # int64, one per segment
    sizes: np.ndarray  # int64, one per segment (0 allowed)
    block: int
    total: int  # elements of the flat buffer, a multiple of block
    pad_sizes: tuple[int, ...]  # the zeros that follow each segment
    row_starts: np.ndarray  # the first row of each non-empty segment: reduceat indices over the rows
    bounds: np.ndarray  # [start, end, start, end, …] of the non-empty segments (an end at `total` left out)
    nonempty: np.ndarray | None  # indices of the non-empty segments; None when none is empty
    zero_counts: np.ndarray  # int64 zeros, one per segment
    no_values: np.ndarray  # float64 NaNs, one per segment

    @classmethod
    def from_sizes(cls, sizes: Sequence[int]) -> Segments:
        if any(size < 0 for size in sizes):
            raise ValueError(f"segment sizes must be >= 0, got {list(sizes)}")
        sizes_array = np.asarray(sizes, np.int64).reshape(-1)
        block = next((b for b in BLOCKS if (-(-sizes_array // b) * b).sum() <= (1 + MAX_PADDING) * sizes_array.sum()),
                     BLOCKS[-1])
        padded = -(-sizes_array // block) * block
        starts = np.zeros(len(sizes_array), np.int64)
        np.cumsum(padded[:-1], out=starts[1:])
        total = int(padded.sum())
        sized = sizes_array > 0
        bounds = np.stack([starts[sized], starts[sized] + sizes_array[sized]], axis=1).reshape(-1)
        if bounds.size and bounds[-1] == total:
            bounds = bounds[:-1]
        arrays = (starts, sizes_array, row_starts := starts[sized] // block, bounds,
                  zero_counts := np.zeros(len(sizes_array), np.int64), no_values := np.full(len(sizes_array), np.nan))
        for array in arrays:
            array.flags.writeable = False
        return cls(starts, sizes_array, block, total, tuple((padded - sizes_array).tolist()),
                   row_starts, bounds, None if sized.all() else np.flatnonzero(sized), zero_counts, no_values)

    @property
    def count(self) -> int:
        return len(self.sizes)

    def pads(self, dtype: np.dtype) -> tuple[np.ndarray | None, ...]:
        """The zeros ``pack`` puts after each segment (None: none), in the buffer's dtype (a mixed-dtype copy is 2x
        slower)."""
        zeros = np.zeros(self.block - 1, dtype)
        zeros.flags.writeable = False
        return tuple(zeros[:size] if size else None for size in self.pad_sizes)


class SegmentStats(NamedTuple):
    """Per segment, arrays of ``Segments.count`` values: ``sum_squares`` (NaN if a NaN is in the segment,
    else inf if an inf is; 0 when empty), ``minimum``/``maximum`` of the finite values (NaN when there is none, or
    when extremes were not asked for), ``nan_count`` and ``inf_count`` (±Inf). Float arrays are in the buffer's
    dtype; a segment with a non-finite sum of squares is recounted in float64 (then exact also where only the squares
    overflowed). The arrays may be shared and read-only: copy before writing. ``recounted``: how many segments were
    (0: no NaN/Inf anywhere, the counts are all zero)."""

    sum_squares: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    nan_count: np.ndarray
    inf_count: np.ndarray
    recounted: int = 0


def pack(arrays: Sequence[np.ndarray], pads: Sequence[np.ndarray | None], out: np.ndarray) -> np.ndarray:
    """Copy ``arrays`` (1-d; float16 into a float32 buffer is exact) end to end into ``out``, each followed by
    its pad (``Segments.pads(out.dtype)``, or a run of them for segments ``i..j``): one ``np.concatenate`` (which
    costs about a microsecond per member: padding that is not needed is left out)."""
    if len(arrays) != len(pads):
        raise ValueError(f"pack: {len(arrays)} arrays for {len(pads)} segments")
    if not arrays:
        return out
    members: list[np.ndarray] = []
    add = members.append
    for array, pad in zip(arrays, pads):
        add(array)
        if pad is not None:
            add(pad)
    return np.concatenate(members, out=out, casting="same_kind")


def segment_stats(flat: np.ndarray, segments: Segments, *, extremes: bool = True) -> SegmentStats:
    """Statistics of every segment of ``flat`` (a 1-d float array of ``segments.total`` elements laid out by ``pack``).

    Whatever the number of segments, the common case is two NumPy calls over the data — one ``np.vecdot`` of the
    ``(rows, block)`` view with itself and, with ``extremes``, one ``minimum.reduceat`` and one ``maximum.reduceat``
    — and one ``add.reduceat`` over the row sums. Non-finite values need no pass of their own: a segment whose sum of
    squares is finite holds none; only the others (rare) are read again, one by one. This is the contract a GPU kernel
    would implement in one pass (flat buffer + segment starts and sizes → per-segment stats).
    """
    if flat.ndim != 1 or flat.dtype.kind != "f" or flat.size != segments.total:
        raise ValueError(f"segment_stats: flat must be a 1-d float array of {segments.total} elements, got "
                         f"{flat.dtype} {flat.shape}")
    none_found = segments.no_values
    if not segments.row_starts.size:
        return SegmentStats(np.zeros(segments.count), none_found, none_found, segments.zero_counts,
                            segments.zero_counts)
    if type(flat).__module__.startswith("cupy"):
        return _on_device(flat, segments, extremes)
    rows = flat.reshape(-1, segments.block)
    if rows.dtype.itemsize < 4:
        rows = rows.astype(np.float32)  # float16 squares overflow past 256
    with np.errstate(over="ignore"):  # NOTE: squares that overflow are recounted below
        row_sums = np.vecdot(rows, rows)
    sum_squares = np.add.reduceat(row_sums, segments.row_starts)
    minimum = np.minimum.reduceat(flat, segments.bounds)[::2] if extremes else none_found
    maximum = np.maximum.reduceat(flat, segments.bounds)[::2] if extremes else none_found
    if segments.nonempty is not None:  # zero-size segments: 0 and NaN there
        sum_squares = _spread(sum_squares, segments.nonempty, segments.count, 0.0)
        if extremes:
            minimum = _spread(minimum, segments.nonempty, segments.count, np.nan)
            maximum = _spread(maximum, segments.nonempty, segments.count, np.nan)
    if math.isfinite(sum(sum_squares.tolist())):  # NOTE: a Python sum of a few floats: 5x cheaper than NumPy's
        return SegmentStats(sum_squares, minimum, maximum, segments.zero_counts, segments.zero_counts)
    return _recounted(flat, segments, sum_squares, minimum, maximum, extremes)


def _spread(values: np.ndarray, where: np.ndarray, count: int, fill: float) -> np.ndarray:
    spread = np.full(count, fill, np.float64)
    spread[where] = values
    return spread


def _recounted(flat: np.ndarray, segments: Segments, sum_squares: np.ndarray, minimum: np.ndarray,
               maximum: np.ndarray, extremes: bool) -> SegmentStats:
    """Rare: the segments whose sum of squares is not finite (NaN/Inf, or float32 squares that overflow), read again
    one by one in float64."""
    sum_squares, minimum, maximum = (a.astype(np.float64) for a in (sum_squares, minimum, maximum))
    nan_count, inf_count = np.zeros(segments.count, np.int64), np.zeros(segments.count, np.int64)
    recounted = np.flatnonzero(~np.isfinite(sum_squares)).tolist()
    for index in recounted:
        start = int(segments.starts[index])
        wide = flat[start:start + int(segments.sizes[index])].astype(np.float64)
        nans, infs = np.isnan(wide), np.isinf(wide)
        nan_count[index], inf_count[index] = np.count_nonzero(nans), np.count_nonzero(infs)
        sum_squares[index] = np.dot(wide, wide)  # NaN or inf if those are in it; finite if only squares overflowed
        if extremes:
            finite = wide[~(nans | infs)]
            minimum[index], maximum[index] = (finite.min(), finite.max()) if finite.size else (np.nan, np.nan)
    return SegmentStats(sum_squares, minimum, maximum, nan_count, inf_count, len(recounted))


def _on_device(flat, segments: Segments, extremes: bool) -> SegmentStats:
    """A CuPy buffer: every statistic in one kernel launch and one copy to the host (engine/backend/cuda/kernels.py),
    returned as the CPU path returns them (float64 and the counts where a sum of squares is not finite)."""
    from engine.cuda import statistics  # NOTE: lazy: only CuPy buffers need CuPy

    wide = flat.astype(np.float32) if flat.dtype.itemsize < 4 else flat
    sum_squares, minimum, maximum, nan_count, inf_count = statistics.segment_statistics(wide, segments.starts,
                                                                                        segments.sizes)
    some_empty = segments.nonempty is not None  # the CPU path spreads its results into float64 arrays then
    with np.errstate(over="ignore"):
        narrow = sum_squares.astype(wide.dtype)
    recounted = int(np.count_nonzero(~np.isfinite(narrow)))
    narrow = narrow.astype(np.float64) if some_empty else narrow
    wanted = np.float64 if recounted or some_empty else flat.dtype
    minimum, maximum = (minimum.astype(wanted), maximum.astype(wanted)) if extremes else (segments.no_values,) * 2
    if not recounted:
        return SegmentStats(narrow, minimum, maximum, segments.zero_counts, segments.zero_counts)
    return SegmentStats(sum_squares, minimum, maximum, nan_count, inf_count, recounted)
