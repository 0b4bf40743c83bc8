"""Every point of one scalar tag of one run, in numpy columns, with the restart rule applied on append."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ScalarColumns:
    """A consistent snapshot of a series: `steps` strictly increasing, all three of equal length."""

    steps: np.ndarray  # int64
    wall_times: np.ndarray  # float64, seconds since the epoch
    values: np.ndarray  # float64, NaN/±Inf kept

    def __len__(self) -> int:
        return len(self.steps)

    def since(self, start: int) -> ScalarColumns:
        return ScalarColumns(self.steps[start:], self.wall_times[start:], self.values[start:])


_EMPTY_STEPS = np.empty(0, np.int64)
_EMPTY_FLOATS = np.empty(0, np.float64)


class ScalarSeries:
    """Append-only columns whose steps stay strictly increasing.

    Restart rule: a point whose step is <= the last step kept means the run was restarted (e.g. from a
    checkpoint). Every kept point with step >= the new step is superseded (removed, and counted in
    `superseded`), so the series always shows the timeline that was written last, as TensorBoard does.
    `revision` grows on every such truncation, so a client holding (revision, length) knows whether it can
    just append the points after `length` or must fetch the series again.
    """

    __slots__ = ("_chunks", "_columns", "_length", "_last_step", "revision", "superseded")

    def __init__(self, initial: ScalarColumns | None = None) -> None:
        self._columns = initial if initial is not None else ScalarColumns(_EMPTY_STEPS, _EMPTY_FLOATS, _EMPTY_FLOATS)
        self._chunks: list[ScalarColumns] = []
        self._length = len(self._columns)
        self._last_step = int(self._columns.steps[-1]) if self._length else None
        self.revision = 0
        self.superseded = 0

    def __len__(self) -> int:
        return self._length

    @property
    def last_step(self) -> int | None:
        return self._last_step

    def extend(self, steps: np.ndarray, wall_times: np.ndarray, values: np.ndarray) -> None:
        """Append points in the order they were written, applying the restart rule."""
        steps = np.asarray(steps, np.int64)
        if len(steps) == 0:
            return
        wall_times = np.asarray(wall_times, np.float64)
        values = np.asarray(values, np.float64)
        # Split the batch into strictly increasing runs; each run after the first starts with a restart.
        breaks = np.flatnonzero(steps[1:] <= steps[:-1]) + 1
        bounds = [0, *breaks.tolist(), len(steps)]
        for start, stop in zip(bounds[:-1], bounds[1:]):
            first = int(steps[start])
            if self._last_step is not None and first <= self._last_step:
                self._truncate_before(first)
            self._chunks.append(ScalarColumns(steps[start:stop], wall_times[start:stop], values[start:stop]))
            self._length += stop - start
            self._last_step = int(steps[stop - 1])

    def _truncate_before(self, step: int) -> None:
        """Drop every point with step >= `step` (a restart)."""
        columns = self.columns()
        keep = int(np.searchsorted(columns.steps, step, side="left"))
        self.superseded += len(columns) - keep
        self._columns = ScalarColumns(columns.steps[:keep], columns.wall_times[:keep], columns.values[:keep])
        self._length = keep
        self._last_step = int(columns.steps[keep - 1]) if keep else None
        self.revision += 1

    def columns(self) -> ScalarColumns:
        """The whole series; appended chunks are merged once, on the first read after they arrive."""
        if self._chunks:
            parts = [self._columns, *self._chunks]
            self._columns = ScalarColumns(
                np.concatenate([p.steps for p in parts]),
                np.concatenate([p.wall_times for p in parts]),
                np.concatenate([p.values for p in parts]),
            )
            self._chunks = []
        return self._columns
