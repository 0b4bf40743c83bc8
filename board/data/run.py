"""One run: tails its event files incrementally and keeps every scalar and histogram point."""
from __future__ import annotations

import os
import time
from collections import defaultdict
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from board.data.histograms import HistogramPoint, HistogramSeries
from board.data.reader import EventFileReader
from board.data.series import ScalarSeries
from instrumentation.format.values import Event, HistogramValue, ScalarValue

READ_BATCH = 50_000  # records per read: bounds the memory of decoded-but-not-yet-columnar events


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the runs page and `/api/runs` show about one run."""

    name: str
    group: str
    last_step: int | None
    last_update: float | None  # newest wall_time of any point, seconds since the epoch
    scalar_tags: int
    histogram_tags: int
    points: int
    size_bytes: int
    corrupt_records: int
    superseded_points: int  # dropped by the restart rule
    files: int


class _FileTail:
    """One event file being followed: its reader and how big the file was when last read."""

    __slots__ = ("reader", "size", "identity")

    def __init__(self, path: Path) -> None:
        self.reader = EventFileReader(path)
        stat = path.stat()
        self.identity = (stat.st_dev, stat.st_ino)
        self.size = -1


class RunState:
    """Every point of one run. Not thread-safe: the store serialises refreshes and reads."""

    def __init__(self, name: str, group: str, path: Path) -> None:
        self.name, self.group, self.path = name, group, path
        self.scalars: dict[str, ScalarSeries] = {}
        self.histograms: dict[str, HistogramSeries] = {}
        self._files: dict[str, _FileTail] = {}
        self.last_update: float | None = None
        self.changed_at = time.monotonic()

    # ---- reading --------------------------------------------------------------------------------------
    def refresh(self, event_files: tuple[str, ...], lock: AbstractContextManager[object] = nullcontext()) -> bool:
        """Read what was appended since the last call; True if anything new arrived.

        Files are decoded outside `lock` and each decoded batch is added under it, so readers of this run
        wait for one batch at most. A file that shrank or was replaced means history was rewritten: the run
        is read again from scratch.
        """
        if self._needs_reset(event_files):
            with lock:
                self._reset()
        changed = False
        for name in event_files:
            path = self.path / name
            tail = self._files.get(name)
            try:
                if tail is None:
                    tail = self._files[name] = _FileTail(path)
                size = path.stat().st_size
            except OSError:  # deleted between discovery and now
                continue
            if size == tail.size:
                continue
            tail.size = size
            while events := tail.reader.read(max_records=READ_BATCH):
                with lock:
                    self._ingest(events)
                changed = True
        if changed:
            self.changed_at = time.monotonic()
        return changed

    def _needs_reset(self, event_files: tuple[str, ...]) -> bool:
        for name, tail in self._files.items():
            path = self.path / name
            try:
                stat = path.stat()
            except OSError:
                return name in event_files  # listed but gone: inconsistent view, start over
            if (stat.st_dev, stat.st_ino) != tail.identity or stat.st_size < tail.reader.offset:
                return True
        return False

    def _reset(self) -> None:
        self.scalars.clear()
        self.histograms.clear()
        self._files.clear()
        self.last_update = None

    def _ingest(self, events: list[Event]) -> None:
        """Group one batch by tag, then append column-wise (one numpy append per tag per batch)."""
        scalar_batches: dict[str, tuple[list[int], list[float], list[float]]] = defaultdict(lambda: ([], [], []))
        newest = self.last_update
        for event in events:
            for value in event.values:
                if isinstance(value, ScalarValue):
                    steps, walls, values = scalar_batches[value.tag]
                    steps.append(value.step)
                    walls.append(value.wall_time)
                    values.append(value.value)
                elif isinstance(value, HistogramValue):
                    self._histogram(value.tag).append(_histogram_point(value))
            if event.values and (newest is None or event.wall_time > newest):
                newest = event.wall_time
        self.last_update = newest
        for tag, (steps, walls, values) in scalar_batches.items():
            series = self.scalars.get(tag)
            if series is None:
                series = self.scalars[tag] = ScalarSeries()
            series.extend(np.array(steps, np.int64), np.array(walls, np.float64), np.array(values, np.float64))

    def _histogram(self, tag: str) -> HistogramSeries:
        series = self.histograms.get(tag)
        if series is None:
            series = self.histograms[tag] = HistogramSeries()
        return series

    # ---- describing -----------------------------------------------------------------------------------
    @property
    def corrupt_records(self) -> int:
        return sum(tail.reader.corrupt_records for tail in self._files.values())

    def summary(self) -> RunSummary:
        steps = [s.last_step for s in (*self.scalars.values(), *self.histograms.values()) if s.last_step is not None]
        return RunSummary(
            name=self.name,
            group=self.group,
            last_step=max(steps) if steps else None,
            last_update=self.last_update,
            scalar_tags=len(self.scalars),
            histogram_tags=len(self.histograms),
            points=sum(len(s) for s in self.scalars.values()),
            size_bytes=_size_on_disk(self.path),
            corrupt_records=self.corrupt_records,
            superseded_points=sum(s.superseded for s in (*self.scalars.values(), *self.histograms.values())),
            files=len(self._files),
        )


def _histogram_point(value: HistogramValue) -> HistogramPoint:
    return HistogramPoint(value.step, value.wall_time, value.min, value.max, value.num, value.edges, value.counts)


def _size_on_disk(path: Path) -> int:
    """Bytes of the run's own files: those in its directory and under its `plugins/` (not its sub-runs)."""
    total = 0
    try:
        entries = list(os.scandir(path))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat().st_size
        except OSError:
            continue
    for directory, _, names in os.walk(path / "plugins"):
        for name in names:
            try:
                total += os.stat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total
