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


def _rounded(edges: np.ndarray, dtype: np.dtype, upward: bool) -> np.ndarray:
    """`edges` in the narrower float `dtype`, rounded so that comparisons stay exact: for any value x of `dtype`,
    x < e ⇔ x < rounded_up(e) and x <= e ⇔ x <= rounded_down(e) (no value of `dtype` lies between)."""
    with np.errstate(over="ignore"):
        narrow = edges.astype(dtype)
    off = narrow.astype(np.float64) < edges if upward else narrow.astype(np.float64) > edges
    narrow[off] = np.nextafter(narrow[off], dtype.type(np.inf if upward else -np.inf))
    return narrow


@functools.lru_cache(maxsize=4)
def _tensorflow_edges_in(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    edges = tensorflow_edges()
    return _rounded(edges[:-1], dtype, upward=True), _rounded(edges[-1:], dtype, upward=False)


def _counts(finite_sorted: np.ndarray, edges: np.ndarray, bins: Bins) -> np.ndarray:
    """np.histogram's counts (bins [e_i, e_i+1), the last one closed), with values outside the edges counted in
    the outermost buckets instead of dropped. A float32/float16 `finite_sorted` is compared with rounded edges
    (exact, see `_rounded`), so it is never widened."""
    if finite_sorted.dtype == np.float64:
        left_edges, last_edge = edges[:-1], edges[-1:]
    elif isinstance(bins, str):  # "tensorflow": the only rule that gets here with narrow values
        left_edges, last_edge = _tensorflow_edges_in(finite_sorted.dtype)
    else:
        left_edges, last_edge = (_rounded(edges[:-1], finite_sorted.dtype, upward=True),
                                 _rounded(edges[-1:], finite_sorted.dtype, upward=False))
    below = np.searchsorted(finite_sorted, left_edges, side="left")
    below_last = int(np.searchsorted(finite_sorted, last_edge, side="right")[0])
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


_MOMENT_CHUNK = 1 << 16  # values widened to float64 at a time for the sums (fits in L2; no 8-byte copy of all)


def _moments(ordered: np.ndarray) -> tuple[float, float]:
    """(sum, sum of squares) in float64, without BLAS (whose threads wake up and spin on a shared machine)."""
    if ordered.dtype == np.float64:
        return float(ordered.sum()), float(np.dot(ordered, ordered))
    total = squares = 0.0
    buffer = np.empty(min(ordered.size, _MOMENT_CHUNK))
    for start in range(0, ordered.size, _MOMENT_CHUNK):
        chunk = ordered[start:start + _MOMENT_CHUNK]
        wide = buffer[:chunk.size]
        np.copyto(wide, chunk)
        total += float(np.add.reduce(wide))
        np.multiply(wide, wide, out=wide)
        squares += float(np.add.reduce(wide))
    return total, squares


def histogram_from_values(values: np.ndarray, bins: Bins = "tensorflow", max_bins: int | None = None, *,
                          may_reorder: bool = False) -> HistogramData:
    """Buckets of the finite values; min/max/sum/sum_squares over all values, so NaN/Inf stay visible there.

    Sorting once (numpy's SIMD sort, GIL released) gives exact counts for any edges and the finite range: a
    search for each of the ~1.5k edges then counts every bucket. float32/float16 values are sorted and compared
    in their own precision (rounded edges, exact). With `may_reorder` the array (the writer's private copy) is
    sorted in place. `values` must be non-empty and real (the writer checks both on the calling thread).
    """
    flat = values.reshape(-1)
    narrow = flat.dtype.kind == "f" and flat.dtype.itemsize < 8 and (bins == "tensorflow" or not isinstance(bins, str))
    if narrow:
        ordered = flat if may_reorder else flat.copy()
        ordered.sort()
    else:
        ordered = np.sort(flat if flat.dtype.kind == "f" else flat.astype(np.float64)).astype(np.float64, copy=False)
    finite_start = int(np.searchsorted(ordered, -np.inf, side="right"))  # NaN sorts last, after +inf
    finite_end = int(np.searchsorted(ordered, np.inf, side="left"))
    finite_sorted = ordered[finite_start:finite_end]
    edges = _edges_for(finite_sorted, bins)
    counts = _counts(finite_sorted, edges, bins)
    if isinstance(bins, str) and bins == "tensorflow":
        edges, counts = _trim_empty(edges, counts)
    if max_bins is not None:
        edges, counts = _merge_buckets(edges, counts, max_bins)
    has_nan = bool(np.isnan(ordered[-1]))
    minimum = float("nan") if has_nan else float(ordered[0])
    maximum = float("nan") if has_nan else float(ordered[-1])
    total, squares = _moments(ordered)
    return HistogramData(minimum, maximum, float(ordered.size), total, squares, edges, counts)
