"""Every histogram of one tag of one run as numpy columns (buckets concatenated), with the restart rule."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from board.data.series import RestartingSeries
from instrumentation.format.values import HistogramValue


@dataclass(frozen=True, slots=True)
class HistogramPoint:
    """One histogram: bucket i holds `counts[i]` values in (`edges[i]`, `edges[i+1]`]."""

    step: int
    wall_time: float
    min: float
    max: float
    num: float
    edges: np.ndarray
    counts: np.ndarray
    sum: float = math.nan
    sum_squares: float = math.nan


_STATS = ("wall_times", "mins", "maxs", "nums", "sums", "sum_squares")


@dataclass(frozen=True, slots=True)
class HistogramColumns:
    """n histograms: per-histogram columns, and every bucket in two concatenated arrays.

    Histogram i holds `counts[offsets[i]:offsets[i+1]]` and `edges[offsets[i] + i : offsets[i+1] + i + 1]`
    (one edge more than counts). About 8 bytes a bucket boundary plus 64 a histogram, against ≈1.2 KB for a
    HistogramValue object with its two small arrays.
    """

    steps: np.ndarray  # int64 [n]
    wall_times: np.ndarray  # float64 [n] (and the five below)
    mins: np.ndarray
    maxs: np.ndarray
    nums: np.ndarray
    sums: np.ndarray
    sum_squares: np.ndarray
    offsets: np.ndarray  # int64 [n + 1], offsets[0] == 0
    counts: np.ndarray  # float64 [offsets[-1]]
    edges: np.ndarray  # float64 [offsets[-1] + n]

    def __len__(self) -> int:
        return len(self.steps)

    def point(self, i: int) -> HistogramPoint:
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return HistogramPoint(int(self.steps[i]), float(self.wall_times[i]), float(self.mins[i]), float(self.maxs[i]),
                              float(self.nums[i]), self.edges[lo + i:hi + i + 1], self.counts[lo:hi],
                              float(self.sums[i]), float(self.sum_squares[i]))

    def points(self) -> list[HistogramPoint]:
        return [self.point(i) for i in range(len(self))]

    def slice(self, start: int, stop: int) -> HistogramColumns:
        """Histograms [start, stop) as columns of their own (offsets rebased to 0)."""
        lo, hi = int(self.offsets[start]), int(self.offsets[stop])
        return HistogramColumns(self.steps[start:stop], *(getattr(self, name)[start:stop] for name in _STATS),
                                self.offsets[start:stop + 1] - lo, self.counts[lo:hi], self.edges[lo + start:hi + stop])

    @staticmethod
    def concatenate(parts: Sequence[HistogramColumns]) -> HistogramColumns:
        shifts = np.cumsum([0, *(int(p.offsets[-1]) for p in parts)])
        offsets = np.concatenate([[0], *(p.offsets[1:] + shift for p, shift in zip(parts, shifts))]).astype(np.int64)
        return HistogramColumns(np.concatenate([p.steps for p in parts]),
                                *(np.concatenate([getattr(p, name) for p in parts]) for name in _STATS),
                                offsets, np.concatenate([p.counts for p in parts]),
                                np.concatenate([p.edges for p in parts]))

    @staticmethod
    def empty() -> HistogramColumns:
        floats = np.empty(0, np.float64)
        return HistogramColumns(np.empty(0, np.int64), *([floats] * len(_STATS)), np.zeros(1, np.int64), floats, floats)

    @staticmethod
    def from_values(values: Sequence[HistogramValue | HistogramPoint]) -> HistogramColumns:
        """Columns of decoded histograms (HistogramValue or HistogramPoint), in the given order."""
        count = len(values)
        if count == 0:
            return HistogramColumns.empty()
        counts = [np.asarray(v.counts, np.float64) for v in values]
        edges = [np.asarray(v.edges, np.float64) for v in values]
        for i, (c, e) in enumerate(zip(counts, edges)):
            if len(e) != len(c) + 1:  # a malformed histo (bucket and bucket_limit lengths differ): keep what pairs up
                kept = max(min(len(c), len(e) - 1), 0)
                counts[i], edges[i] = c[:kept], (e[:kept + 1] if len(e) else np.zeros(1))
        sizes = np.fromiter(map(len, counts), np.int64, count)
        stats = np.array([[v.wall_time, v.min, v.max, v.num, v.sum, v.sum_squares] for v in values], np.float64)
        return HistogramColumns(np.fromiter((v.step for v in values), np.int64, count), *stats.T.copy(),
                                np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                                np.concatenate(counts), np.concatenate(edges))


class HistogramSeries(RestartingSeries):
    """Histograms of one tag in step order; a step <= the last one supersedes every later-or-equal step."""

    __slots__ = ()

    def __init__(self, initial: HistogramColumns | None = None) -> None:
        super().__init__(initial if initial is not None else HistogramColumns.empty())

    @property
    def points(self) -> list[HistogramPoint]:
        return self.columns().points()

    def append(self, point: HistogramPoint) -> None:
        self.extend(HistogramColumns.from_values([point]))

    def extend(self, columns: HistogramColumns) -> None:
        """Append histograms in the order they were written, applying the restart rule."""
        if len(columns):
            self._append_runs(columns.steps, lambda start, stop: columns if (start, stop) == (0, len(columns))
                              else columns.slice(start, stop))

    def _head(self, columns: HistogramColumns, keep: int) -> HistogramColumns:
        return columns.slice(0, keep)

    def columns(self) -> HistogramColumns:
        """Every histogram; appended chunks are merged once, on the first read after they arrive."""
        if self._chunks:
            self._columns = HistogramColumns.concatenate([self._columns, *self._chunks])
            self._chunks = []
        return self._columns

    def steps(self) -> np.ndarray:
        return np.asarray(self.columns().steps)
