"""The two on-disk histogram forms (`histo` and `[k,3]` tensors) converted to one: bucket edges + counts."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Buckets:
    """Bucket i holds counts[i] values in (edges[i], edges[i+1]]; len(edges) == len(counts) + 1."""

    edges: np.ndarray
    counts: np.ndarray


def buckets_from_histo(bucket_limit: np.ndarray, counts: np.ndarray, minimum: float, maximum: float) -> Buckets:
    """A TF `HistogramProto`'s right edges plus its exact min/max -> contiguous edges.

    Rule (the same as TensorBoard's own data_compat): the first bucket's left edge is `min`, and the last bucket's
    right edge is `max` (writers often store a huge sentinel such as DBL_MAX there). Each is applied only where
    it keeps the edges non-decreasing (an empty leading bucket may lie entirely below `min`) and `min`/`max`
    are finite, so no bucket ever loses a value.
    """
    limits = np.asarray(bucket_limit, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    if limits.size == 0:
        left = minimum if math.isfinite(minimum) else 0.0
        return Buckets(np.array([left]), counts[:0])
    left = minimum if math.isfinite(minimum) and minimum <= limits[0] else limits[0]
    edges = np.concatenate([[left], limits])
    previous = edges[-2]
    if math.isfinite(maximum) and previous <= maximum < edges[-1]:
        edges[-1] = maximum
    return Buckets(edges, counts)


def buckets_from_tensor(rows: np.ndarray) -> Buckets:
    """A `[k,3]` (left, right, count) tensor -> edges = first left + every right (TensorBoard writes them
    contiguous)."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
    if rows.shape[0] == 0:
        return Buckets(np.zeros(1), np.zeros(0))
    return Buckets(np.concatenate([rows[:1, 0], rows[:, 1]]), rows[:, 2].copy())


@dataclass(frozen=True, slots=True)
class Moments:
    minimum: float
    maximum: float
    num: float
    sum: float
    sum_squares: float


def moments_from_buckets(buckets: Buckets) -> Moments:
    """What a `[k,3]` tensor does not store, estimated: min/max = outer edges of the non-empty buckets,
    sum and sum of squares from bucket centres (exact when every bucket has zero width, as TF2 writes them
    for constant data)."""
    counts, edges = buckets.counts, buckets.edges
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        return Moments(0.0, 0.0, 0.0, 0.0, 0.0)
    centres = (edges[:-1] + edges[1:]) / 2
    return Moments(float(edges[nonzero[0]]), float(edges[nonzero[-1] + 1]), float(counts.sum()),
                   float(np.dot(counts, centres)), float(np.dot(counts, centres * centres)))
