"""One run: tails its event files incrementally and keeps every scalar and histogram point."""
from __future__ import annotations

import logging
import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from board.data import cache
from board.data.histograms import HistogramColumns, HistogramSeries
from board.data import plugin_data as plugin_limits
from board.data.plugin_data import PluginData
from board.data.reader import EventFileReader, ScalarBatch
from board.data.series import ScalarSeries
from instrumentation.format.values import HistogramValue, PluginValue, TextValue

log = logging.getLogger(__name__)
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
    warnings: tuple[str, ...]  # why some of the run may be missing: unreadable files, corrupt data, a failed read


class _FileTail:
    """One event file being followed: its reader and how big the file was when last read."""

    __slots__ = ("reader", "size", "identity")

    def __init__(self, path: Path, mark: cache.FileMark | None = None) -> None:
        self.reader = EventFileReader(path)
        if mark is not None:  # resuming from where the cached entry stopped reading
            self.reader.seek(mark.offset, mark.corrupt_records, mark.problem)
        stat = path.stat()
        self.identity = (stat.st_dev, stat.st_ino)
        self.size = -1


class RunState:
    """Every point of one run. Not thread-safe: the store serialises refreshes and reads."""

    def __init__(self, name: str, group: str, path: Path, cache_dir: Path | None = None) -> None:
        self.name, self.group, self.path = name, group, path
        self.scalars: dict[str, ScalarSeries] = {}
        self.histograms: dict[str, HistogramSeries] = {}
        self.plugin_data = PluginData()  # text, images, PR curves, hparams, graphs, other plugins
        self._files: dict[str, _FileTail] = {}
        self.last_update: float | None = None
        self._cache_dir = cache_dir
        self._cached_points = 0
        self._file_problems: dict[str, str] = {}  # file name → why it could not be read at the last attempt
        self.directory_problem: str | None = None  # set by the store from discovery: the directory is not listable
        self.failure: str | None = None  # set by the store: the last refresh raised (and why)
        self.failed_marks: tuple[tuple[str, int, int], ...] = ()  # the event files' state when it did
        if cache_dir is not None:
            self._restore(cache_dir)

    # ---- the on-disk cache ----------------------------------------------------------------------------
    def _restore(self, cache_dir: Path) -> None:
        cached = cache.load(cache_dir, self.path)
        if cached is None:
            return
        try:
            files = {mark.name: _FileTail(self.path / mark.name, mark) for mark in cached.files}
        except OSError:
            return
        self._files = files
        self.scalars, self.histograms, self.plugin_data = cached.scalars, cached.histograms, cached.plugin_data
        self.last_update = cached.last_update
        self._cached_points = cached.points

    def save_cache_if_grown(self, growth: float = 0.25) -> None:
        """Save the run's points when they grew by `growth` since the last save (always after a first read)."""
        if self._cache_dir is None:
            return
        points = sum(len(s) for s in self.scalars.values()) + sum(len(s) for s in self.histograms.values()) + \
            len(self.plugin_data)
        if points == self._cached_points or points < self._cached_points * (1 + growth):
            return
        marks = []
        for name, tail in self._files.items():
            try:
                marks.append(cache.FileMark(name, tail.reader.offset, tail.reader.corrupt_records,
                                            cache.prefix_crc32c(self.path / name, tail.reader.offset),
                                            tail.reader.problem))
            except OSError:
                return
        try:
            cache.save(self._cache_dir, marks, self.scalars, self.histograms, self.last_update, self.plugin_data)
        except OSError as error:  # a read-only or full disk costs speed on the next start, nothing else
            log.info("not caching run %s: %s", self.name, error)
            self._cache_dir = None
            return
        self._cached_points = points

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
                if size == tail.size:
                    continue
                while (batch := tail.reader.read_columns(max_records=READ_BATCH)).records:
                    histograms = _histograms_by_tag(batch)
                    with lock:
                        self._ingest(batch, histograms)
                    changed = True
            except FileNotFoundError:  # deleted between discovery and now
                continue
            except OSError as error:  # unreadable (permissions, I/O error): the other files are read all the same
                self._file_problems[name] = f"{name}: not readable ({error.strerror or error})"
                continue
            tail.size = size  # NOTE: only after a complete read, so that a file readable again is read again
            self._file_problems.pop(name, None)
        if changed:
            for series in self.scalars.values():
                series.publish()  # readers see the new points from here on, without taking the lock
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
        self.plugin_data.clear()
        self._files.clear()
        self.last_update = None

    def _ingest(self, batch: ScalarBatch, histograms: dict[str, HistogramColumns]) -> None:
        """Add one decoded batch: scalars column-wise (one numpy append per tag), histograms likewise."""
        newest = [value.wall_time for event in batch.events for value in event.values]
        if len(batch):
            newest.append(float(batch.wall_times.max()))
            self._add_scalars(batch.tag_names, batch.tag_codes, batch.steps, batch.wall_times, batch.values)
        for tag, columns in histograms.items():
            self._histogram(tag).extend(columns)
        self.plugin_data.extend(value for event in batch.events for value in event.values
                                if value.__class__ is TextValue or value.__class__ is PluginValue)
        if newest:
            self.last_update = max(newest) if self.last_update is None else max(self.last_update, *newest)

    def _add_scalars(self, names: list[str], codes: np.ndarray, steps: np.ndarray, wall_times: np.ndarray,
                     values: np.ndarray) -> None:
        """Points tagged `names[codes[i]]`, grouped per tag by a stable sort (each tag's points stay in file order)."""
        count = len(codes)
        if len(names) > 1:
            # NOTE: numpy's stable sort is a radix sort for 16-bit keys: linear in the points
            order = np.argsort(codes.astype(np.int16 if len(names) < 1 << 15 else np.int32), kind="stable")
            steps, wall_times, values = steps[order], wall_times[order], values[order]
            bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(names)))])
        else:
            bounds = np.array([0, count])
        for code, tag in enumerate(names):
            lo, hi = int(bounds[code]), int(bounds[code + 1])
            if lo == hi:
                continue
            series = self.scalars.get(tag)
            if series is None:
                series = self.scalars[tag] = ScalarSeries()
            series.extend(steps[lo:hi], wall_times[lo:hi], values[lo:hi])

    def _histogram(self, tag: str) -> HistogramSeries:
        series = self.histograms.get(tag)
        if series is None:
            series = self.histograms[tag] = HistogramSeries()
        return series

    # ---- describing -----------------------------------------------------------------------------------
    @property
    def corrupt_records(self) -> int:
        return sum(tail.reader.corrupt_records for tail in self._files.values())

    @property
    def warnings(self) -> tuple[str, ...]:
        """Human lines, one per reason some of the run may be missing or wrong."""
        lines = [] if self.directory_problem is None else [self.directory_problem]
        lines += [self._file_problems[name] for name in sorted(self._file_problems)]
        for name, tail in sorted(self._files.items()):
            if tail.reader.problem:
                lines.append(f"{name}: {tail.reader.problem}")
        if self.plugin_data.dropped:
            lines.append(f"{self.plugin_data.dropped} image/text/plugin value(s) not kept: over the "
                         f"{plugin_limits.MAX_RUN_BYTES / (1 << 20):g} MiB kept per run")
        if self.corrupt_records:
            lines.append(f"{self.corrupt_records} corrupt record(s) skipped")
        if self.failure is not None:
            lines.append(f"reading stopped: {self.failure}")
        return tuple(lines)

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
            warnings=self.warnings,
        )


def _histograms_by_tag(batch: ScalarBatch) -> dict[str, HistogramColumns]:
    """The batch's histograms as columns per tag (built outside the store's lock)."""
    by_tag: dict[str, list[HistogramValue]] = {}
    for event in batch.events:
        for value in event.values:
            if value.__class__ is HistogramValue:
                by_tag.setdefault(value.tag, []).append(value)
    return {tag: HistogramColumns.from_values(values) for tag, values in by_tag.items()}


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
    plugins = path / "plugins"
    if plugins.is_symlink():  # NOTE: links are not followed (they may lead outside the log directory)
        return total
    for directory, _, names in os.walk(plugins):
        for name in names:
            try:
                total += os.stat(os.path.join(directory, name), follow_symlinks=False).st_size
            except OSError:
                continue
    return total
