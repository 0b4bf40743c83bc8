"""Robust trends for leak detection: Theil–Sen slope and the Mann–Kendall test (tie-corrected z score)."""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=16)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (i, j) of every pair i < j of n points (cached: the window has one size)."""
    return np.triu_indices(n, k=1)


def theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Median of the slopes between every pair of points with distinct x (0.0 for fewer than two)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.size < 2:
        return 0.0
    i, j = _pairs(x.size)
    dx = x[j] - x[i]
    keep = dx != 0
    if not keep.any():
        return 0.0
    return float(np.median((y[j] - y[i])[keep] / dx[keep]))


def mann_kendall_z(y: np.ndarray) -> float:
    """Mann–Kendall statistic as a z score (continuity and tie corrected); > 0 means an upward trend."""
    y = np.asarray(y, np.float64)
    n = y.size
    if n < 3:
        return 0.0
    i, j = _pairs(n)
    s = float(np.sign(y[j] - y[i]).sum())
    _, counts = np.unique(y, return_counts=True)
    ties = counts[counts > 1].astype(np.float64)
    variance = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18.0
    if variance <= 0:
        return 0.0
    if s > 0:
        return (s - 1) / math.sqrt(variance)
    if s < 0:
        return (s + 1) / math.sqrt(variance)
    return 0.0


@dataclass(frozen=True, slots=True)
class Trend:
    """The growth seen over a window of steps: ``slope`` over all of it, ``recent_slope`` over its last third."""

    steps: tuple[int, ...]
    values: tuple[int, ...]
    slope: float  # units per step (Theil–Sen)
    recent_slope: float
    z: float  # Mann–Kendall

    def is_growth(self, min_slope: float, min_z: float) -> bool:
        """Sustained growth: a slope of at least ``min_slope`` over the window, still growing in its last third
        (a cache that filled and stopped is flat there) and a monotone trend (Mann–Kendall z >= ``min_z``)."""
        return self.slope >= min_slope and self.recent_slope >= 0.5 * self.slope and self.z >= min_z


def trend(steps: list[int], values: list[int], z: float | None = None) -> Trend:
    """The trend of ``values`` over ``steps`` (``z``: their Mann–Kendall z when already computed)."""
    x, y = np.asarray(steps, np.float64), np.asarray(values, np.float64)
    tail = max(3, x.size // 3)
    return Trend(tuple(steps), tuple(values), theil_sen_slope(x, y), theil_sen_slope(x[-tail:], y[-tail:]),
                 mann_kendall_z(y) if z is None else z)


def growth(steps: list[int], values: list[int], min_slope: float, min_z: float) -> Trend | None:
    """``trend(steps, values)`` if it ``is_growth(min_slope, min_z)``, else None: the same answer, mostly without
    NumPy. Over steps that only increase: a window that never rises (each value <= the one before) has a
    Mann–Kendall S <= 0 (z <= 0) and no positive pairwise slope; and a pair of steps further apart than
    (max - min value) / ``min_slope`` has a slope below ``min_slope``, so when those are at least half of the
    pairs the Theil–Sen median is below it. Otherwise z is tested before any slope is computed."""
    if (min_z > 0 or min_slope > 0) and all(map(operator.lt, steps, steps[1:])):
        if all(map(operator.ge, values, values[1:])):
            return None
        pairs = len(steps) * (len(steps) - 1) // 2
        if min_slope > 0 and 2 * _close_pairs(steps, (max(values) - min(values)) / min_slope) < pairs:
            return None
    z = mann_kendall_z(np.asarray(values, np.float64))
    if z < min_z:
        return None
    found = trend(steps, values, z)
    return found if found.is_growth(min_slope, min_z) else None


def _close_pairs(steps: list[int], distance: float) -> int:
    """How many pairs i < j of increasing ``steps`` lie at most ``distance`` apart (with a margin for rounding)."""
    distance = distance * (1 + 1e-9) + 1e-9
    count, first = 0, 0
    for last, step in enumerate(steps):
        while step - steps[first] > distance:
            first += 1
        count += last - first
    return count
