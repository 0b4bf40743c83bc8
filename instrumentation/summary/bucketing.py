"""Values -> histogram buckets (TensorFlow's default exponential buckets, n uniform bins, or numpy's "auto")."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

Bins = str | int


@dataclass(frozen=True, slots=True)
class HistogramData:
    """What a histogram record carries. Bucket i holds counts[i] values between edges[i] and edges[i+1]."""

    minimum: float
    maximum: float
    num: float
    sum: float
    sum_squares: float
    edges: np.ndarray
    counts: np.ndarray


@functools.lru_cache(maxsize=1)
def tensorflow_edges() -> np.ndarray:
    """TensorFlow's default bucket edges: ±1e-12·1.1^k up to 1e20, and 0 (the list torch's writer uses)."""
    positive = []
    edge = 1e-12
    while edge < 1e20:
        positive.append(edge)
        edge *= 1.1
    positive_edges = np.array(positive)
    return np.concatenate([-positive_edges[::-1], [0.0], positive_edges])


def _edges_for(finite_sorted: np.ndarray, bins: Bins) -> np.ndarray:
    if isinstance(bins, str):
        if bins == "tensorflow":
            return tensorflow_edges()
        return np.histogram_bin_edges(finite_sorted, bins=bins)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool) and bins > 0:
        low, high = (float(finite_sorted[0]), float(finite_sorted[-1])) if finite_sorted.size else (0.0, 1.0)
        if low == high:
            low, high = low - 0.5, high + 0.5  # numpy's rule for a constant input
        return np.linspace(low, high, int(bins) + 1)
    raise ValueError(f"bins must be 'tensorflow', a numpy bin rule name or a positive int, got {bins!r}")


def _counts(finite_sorted: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """np.histogram's counts (bins [e_i, e_i+1), the last one closed), with values outside the edges counted in
    the outermost buckets instead of dropped."""
    below = np.searchsorted(finite_sorted, edges[:-1], side="left")
    below_last = np.searchsorted(finite_sorted, edges[-1], side="right")
    counts = np.diff(np.append(below, below_last)).astype(np.float64)
    counts[0] += below[0]
    counts[-1] += finite_sorted.size - below_last
    return counts


def _trim_empty(edges: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drops the empty buckets before the first and after the last non-empty one (TensorFlow's default has ~1500)."""
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        return edges[:2], counts[:1]
    first, last = int(nonzero[0]), int(nonzero[-1])
    return edges[first:last + 2], counts[first:last + 1]


def _merge_buckets(edges: np.ndarray, counts: np.ndarray, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `max_bins` buckets, merging runs of adjacent ones (torch's `max_bins`)."""
    group = -(-counts.size // max_bins)
    if group <= 1:
        return edges, counts
    padded = np.concatenate([counts, np.zeros(-counts.size % group)])
    return np.append(edges[:-1:group], edges[-1]), padded.reshape(-1, group).sum(axis=1)


def histogram_from_values(values: np.ndarray, bins: Bins = "tensorflow", max_bins: int | None = None) -> HistogramData:
    """Buckets of the finite values; min/max/sum/sum_squares over all values, so NaN/Inf stay visible there.

    Sorting once (numpy releases the GIL for it) gives exact counts for any edges and the finite range.
    `values` must be non-empty and real (the writer checks both on the calling thread).
    """
    flat = values.reshape(-1)
    # NOTE: sort in the input's precision (float32 sorts twice as fast), then widen the sorted copy once: every
    # comparison with the float64 edges and every sum below then runs in float64 without further copies.
    ordered = np.sort(flat if flat.dtype.kind == "f" else flat.astype(np.float64)).astype(np.float64, copy=False)
    finite_start = int(np.searchsorted(ordered, -np.inf, side="right"))  # NaN sorts last, after +inf
    finite_end = int(np.searchsorted(ordered, np.inf, side="left"))
    finite_sorted = ordered[finite_start:finite_end]
    edges = _edges_for(finite_sorted, bins)
    counts = _counts(finite_sorted, edges)
    if isinstance(bins, str) and bins == "tensorflow":
        edges, counts = _trim_empty(edges, counts)
    if max_bins is not None:
        edges, counts = _merge_buckets(edges, counts, max_bins)
    has_nan = bool(np.isnan(ordered[-1]))
    minimum = float("nan") if has_nan else float(ordered[0])
    maximum = float("nan") if has_nan else float(ordered[-1])
    return HistogramData(minimum, maximum, float(ordered.size), float(ordered.sum()), float(np.dot(ordered, ordered)),
                         edges, counts)
