"""TensorBoard's percentile bands and rebinning for one histogram (storage: `histogram_columns`)."""
from __future__ import annotations

import numpy as np

from board.data.histogram_columns import HistogramColumns, HistogramPoint, HistogramSeries

__all__ = ["BASIS_POINTS", "HistogramColumns", "HistogramPoint", "HistogramSeries", "evenly_spaced", "finite_bounds",
           "left_out", "percentiles", "rebin"]

# TensorBoard's distribution basis points (1/10000): min, a normal distribution's -1.5σ, -σ, -0.5σ, median, … max.
BASIS_POINTS = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)


def left_out(point: HistogramPoint) -> int:
    """Values counted in ``num`` but in no bucket: NaN and ±Inf (writers bucket the finite values only and keep
    ``num`` the count of all, as TensorBoard's and ours do); 0 where ``num`` is not above the buckets' sum."""
    total = float(np.asarray(point.counts, np.float64).sum())
    return int(round(point.num - total)) if np.isfinite(point.num) and point.num > total else 0


def finite_bounds(point: HistogramPoint) -> tuple[float, float]:
    """(min, max) of the bucketed values: the histogram's own where finite, else the edges of its non-empty buckets
    (NaN, NaN when every bucket is empty)."""
    low, high = point.min, point.max
    if np.isfinite(low) and np.isfinite(high):
        return float(low), float(high)
    counts, edges = np.asarray(point.counts, np.float64), np.asarray(point.edges, np.float64)
    filled = np.flatnonzero(counts > 0)
    if not len(filled):
        return float("nan"), float("nan")
    left, right = float(edges[filled[0]]), float(edges[filled[-1] + 1])
    return (float(low) if np.isfinite(low) else left), (float(high) if np.isfinite(high) else right)


def percentiles(point: HistogramPoint, basis_points: tuple[int, ...] = BASIS_POINTS) -> np.ndarray:
    """Values below which each basis point (in 1/10000) of the mass lies, interpolated linearly inside buckets.

    The same rule as TensorBoard's `compress_histogram_proto` (so the bands match its distribution view): the
    bucket is the first whose cumulative weight exceeds the basis point, empty buckets are skipped, a bucket's
    left edge is the previous bucket's limit (or the histogram's min), and both edges are clipped to [min, max].
    """
    counts = np.asarray(point.counts, np.float64)
    total = counts.sum()
    if len(counts) == 0 or total <= 0:
        return np.full(len(basis_points), np.nan)  # nothing bucketed (e.g. every value NaN): nothing to draw
    low, high = finite_bounds(point)  # NaN/Inf left out of the buckets: the bucketed values' range
    scale = basis_points[-1]
    weights = np.cumsum(counts * scale / total)
    limits = np.asarray(point.edges, np.float64)[1:]
    out = np.empty(len(basis_points))
    for index, basis_point in enumerate(basis_points):
        bucket = int(np.searchsorted(weights, basis_point, side="right"))
        while bucket < len(weights) and weights[bucket] == (weights[bucket - 1] if bucket else 0.0):
            bucket += 1
        if bucket >= len(weights):
            out[index:] = high
            break
        previous = weights[bucket - 1] if bucket else 0.0
        left = low if not bucket or not previous else max(limits[bucket - 1], low)
        right = min(limits[bucket], high)
        out[index] = left + (basis_point - previous) * (right - left) / (weights[bucket] - previous)
    return out


def rebin(point: HistogramPoint, grid: np.ndarray) -> np.ndarray:
    """Counts of `point` on the bucket boundaries `grid`, spreading each bucket uniformly over its width."""
    edges = np.clip(np.asarray(point.edges, np.float64), *finite_bounds(point))
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(point.counts, np.float64))])
    order = np.argsort(edges, kind="stable")
    at_grid = np.interp(grid, edges[order], cumulative[order], left=0.0, right=cumulative[-1])
    return np.diff(at_grid)


def evenly_spaced(count: int, keep: int) -> np.ndarray:
    """Up to `keep` indices of `count` items, evenly spread, always with the first and the last."""
    if count <= keep:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, keep).round().astype(np.int64))
