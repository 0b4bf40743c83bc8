"""Every point of one scalar tag of one run, in numpy columns, with the restart rule applied on append."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


class RestartingSeries:
    """Append-only columns (chunks merged on read) whose steps stay strictly increasing: the restart rule.

    Subclasses hold `_columns` objects with a `steps` column and say how to merge (`columns()`) and cut
    (`_head`) them.
    """

    __slots__ = ("_chunks", "_columns", "_length", "_last_step", "revision", "superseded")

    def __init__(self, initial: Any) -> None:
        self._columns = initial
        self._chunks: list[Any] = []
        self._length = len(initial)
        self._last_step = int(initial.steps[-1]) if self._length else None
        self.revision = 0
        self.superseded = 0

    def __len__(self) -> int:
        return self._length

    @property
    def last_step(self) -> int | None:
        return self._last_step

    def columns(self) -> Any:
        raise NotImplementedError

    def _head(self, columns: Any, keep: int) -> Any:
        raise NotImplementedError

    def _append_runs(self, steps: np.ndarray, piece: Callable[[int, int], Any]) -> None:
        """Append `piece(start, stop)` for each strictly increasing run of `steps`; a run whose first step is
        <= the last step kept first supersedes every kept point with step >= it."""
        breaks = np.flatnonzero(steps[1:] <= steps[:-1]) + 1
        bounds = [0, *breaks.tolist(), len(steps)]
        for start, stop in zip(bounds[:-1], bounds[1:]):
            first = int(steps[start])
            if self._last_step is not None and first <= self._last_step:
                whole = self.columns()
                keep = int(np.searchsorted(whole.steps, first, side="left"))
                self.superseded += len(whole) - keep
                self._columns = self._head(whole, keep)
                self._length = keep
                self.revision += 1
            self._chunks.append(piece(start, stop))
            self._length += stop - start
            self._last_step = int(steps[stop - 1])


class ScalarSeries(RestartingSeries):
    """Every point of one scalar tag; the restart rule (see `RestartingSeries`).

    Restart rule: a point whose step is <= the last step kept means the run was restarted (e.g. from a
    checkpoint). Every kept point with step >= the new step is superseded (removed, and counted in
    `superseded`), so the series always shows the timeline that was written last, as TensorBoard does.
    `revision` grows on every such truncation, so a client holding (revision, length) knows whether it can
    just append the points after `length` or must fetch the series again.
    """

    __slots__ = ()

    def __init__(self, initial: ScalarColumns | None = None) -> None:
        super().__init__(initial if initial is not None else ScalarColumns(_EMPTY_STEPS, _EMPTY_FLOATS, _EMPTY_FLOATS))

    def extend(self, steps: np.ndarray, wall_times: np.ndarray, values: np.ndarray) -> None:
        """Append points in the order they were written, applying the restart rule."""
        steps = np.asarray(steps, np.int64)
        if len(steps) == 0:
            return
        wall_times = np.asarray(wall_times, np.float64)
        values = np.asarray(values, np.float64)
        self._append_runs(steps, lambda start, stop: ScalarColumns(steps[start:stop], wall_times[start:stop],
                                                                    values[start:stop]))

    def _head(self, columns: ScalarColumns, keep: int) -> ScalarColumns:
        return ScalarColumns(columns.steps[:keep], columns.wall_times[:keep], columns.values[:keep])

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
