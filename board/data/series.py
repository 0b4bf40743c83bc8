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

    One thread writes (`extend`, `columns`, `publish`); any number read `snapshot()` without a lock: it returns
    the columns and revision of the last `publish()`, which are never written again. Appended points are
    merged into a buffer with spare room (half the length, only once a published series grows), beyond
    every length published from it, so a live series costs amortised O(new points) a pass, not a copy of it.
    """

    __slots__ = ("_buffer", "_published")

    def __init__(self, initial: ScalarColumns | None = None) -> None:
        super().__init__(initial if initial is not None else ScalarColumns(_EMPTY_STEPS, _EMPTY_FLOATS, _EMPTY_FLOATS))
        self._buffer: ScalarColumns | None = None  # arrays with room; `_columns` is then a prefix of them
        self._published = (self._columns, self.revision)

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
        self._buffer = None  # published snapshots may hold rows past `keep`: never write this buffer again
        return ScalarColumns(columns.steps[:keep], columns.wall_times[:keep], columns.values[:keep])

    def columns(self) -> ScalarColumns:
        """The whole series including unpublished points (the writer's view; readers use `snapshot`)."""
        if not self._chunks:
            return self._columns
        kept, parts = len(self._columns), self._chunks
        length = kept + sum(len(part) for part in parts)
        buffer = self._buffer
        if buffer is None or len(buffer) < length:
            room = length if self._published[0] is not self._columns or not kept else length + length // 2
            grown = ScalarColumns(np.empty(room, np.int64), np.empty(room, np.float64), np.empty(room, np.float64))
            for name in ("steps", "wall_times", "values"):
                getattr(grown, name)[:kept] = getattr(self._columns, name)
            buffer = self._buffer = grown
        at = kept
        for part in parts:
            for name in ("steps", "wall_times", "values"):
                getattr(buffer, name)[at:at + len(part)] = getattr(part, name)
            at += len(part)
        self._columns = ScalarColumns(buffer.steps[:length], buffer.wall_times[:length], buffer.values[:length])
        self._chunks = []
        return self._columns

    def publish(self) -> None:
        """Make every point appended so far visible to `snapshot()` (writer side)."""
        self._published = (self.columns(), self.revision)

    def snapshot(self) -> tuple[ScalarColumns, int]:
        """(columns, revision) as last published: consistent, never modified afterwards, no lock needed."""
        return self._published
