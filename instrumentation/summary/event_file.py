"""The async layer: one background thread encodes, frames and appends queued events to a run's event files.

Queue items are tuples whose first element, an ``Item``, says what they hold (the calling thread builds them, the
writer thread reads them):

- ``(SCALAR, run_dir, tag, value, step, wall_time)``: one scalar Event (``scalar_records.scalar``);
- ``(ROWS, run_dir, tags, rows, steps, walls)``: a scalar Event per row, one ``simple_value`` per tag
  (``RunBatch.add_rows``);
- ``(BUILD, run_dir, build, args)``: ``build(*args)`` returns one serialized Event, or a list of them (histograms,
  images: built here, off the calling thread);
- ``(OPEN, run_dir)``: creates the run's file if it has none; ``(FLUSH, None, done)``: sets ``done`` once what came
  before is written.

``run_dir`` None is the writer's own run.
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import deque
from enum import Enum
from typing import Any

from instrumentation.format.metadata import event_file_name
from instrumentation.format.records import frame_records
from instrumentation.summary.builders import file_version_event
from instrumentation.summary.run_batch import RunBatch
from instrumentation.summary.scalar_records import scalar

logger = logging.getLogger("instrumentation.summary")


class Item(Enum):
    """What a queue item holds (see the module docstring for each one's fields)."""

    SCALAR = "scalar"
    ROWS = "rows"
    BUILD = "build"
    OPEN = "open"
    FLUSH = "flush"


SCALAR, ROWS, BUILD, OPEN, FLUSH = Item.SCALAR, Item.ROWS, Item.BUILD, Item.OPEN, Item.FLUSH

_LIVE_WRITERS: weakref.WeakSet[AsyncEventWriter] = weakref.WeakSet()
_file_sequence = iter(range(1 << 62))  # the <n> of event file names, unique in this process


class _EventFile:
    """One append-only event file written with os.write (no user-space buffer a fork could duplicate)."""

    def __init__(self, run_dir: str, suffix: str, header: bytes) -> None:
        """Creates the file and writes `header`; on OSError nothing stays open and no file is left behind."""
        self.path = os.path.join(run_dir, event_file_name(next(_file_sequence), suffix))
        os.makedirs(run_dir, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size_bytes = 0
        self.intact = True  # False once a failed write could not be cut back: the file gets no more records
        try:
            self.size_bytes = os.fstat(self.fd).st_size  # NOTE: 0 unless a process with our pid wrote it this second
            self.append(header)
        except OSError:
            if self.size_bytes == 0:
                _unlink_quietly(self.path)
            self.close_quietly()
            raise

    def append(self, payload: bytes) -> None:
        """Writes all of `payload`, or cuts the file back to its last complete record and raises OSError."""
        view = memoryview(payload)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            try:
                os.ftruncate(self.fd, self.size_bytes)
            except OSError:
                self.intact = False
            raise
        self.size_bytes += len(payload)

    def close(self) -> None:
        os.close(self.fd)

    def close_quietly(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass  # NOTE: the descriptor is released even when close reports an error (POSIX on Linux)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class AsyncEventWriter:
    """Queues items (see the module docstring) on the calling thread; a daemon thread turns them into records.

    Queuing costs one deque append. The thread writes whatever is queued every `flush_secs`, as soon as
    `max_queue` items wait, and on `flush()`/`close()`/interpreter exit; written bytes reach the OS at once,
    so a process killed after `flush()` returns leaves every flushed event readable. I/O errors (a full disk) are
    never raised: the events of a failed write are dropped and counted in `dropped_events`, the file is cut back to
    its last complete record, a run whose file could not be started leaves no file and no open descriptor, and the
    next write tries again; a warning is logged when a run's writes start failing and a line when they succeed
    again. In a child process after `fork`, the writer forgets the parent's queue and files and starts new files
    (named with the child's pid) in the same directories on the child's first event, so the two processes never
    write into one file.
    """

    def __init__(self, run_dir: str, *, max_queue: int, flush_secs: float, filename_suffix: str = "") -> None:
        self.run_dir = run_dir
        self.max_queue = max(1, int(max_queue))
        self.max_pending = max(64 * self.max_queue, 1 << 16)  # beyond this the calling thread waits (backpressure)
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.dropped_events = 0
        self.written_events = 0
        self._reported: set[tuple[str, str]] = set()
        self._failing: dict[str, int] = {}  # run dir -> dropped_events when its writes started failing
        self.queue: deque[tuple[Any, ...]] = deque()  # items, each a tuple starting with its Item
        self._start()
        _LIVE_WRITERS.add(self)

    def _start(self) -> None:
        self.queue.clear()  # NOTE: cleared, never replaced: SummaryWriter holds `queue.append` for its hot path
        self._wakeup = threading.Event()
        self._drained = threading.Condition()
        self._files: dict[str, _EventFile] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="flowscope-summary-writer", daemon=True)
        self._thread.start()

    # ---- calling thread -------------------------------------------------------------------------------------
    def put(self, item: tuple[Any, ...]) -> None:
        """Queues one item (a tuple starting with its ``Item``, see the module docstring)."""
        queue = self.queue
        queue.append(item)
        if len(queue) >= self.max_queue:
            self.on_full()

    def on_full(self) -> None:
        """Wakes the writer thread; past `max_pending` queued items, waits until it has caught up."""
        if self._closed:
            return
        if not self._wakeup.is_set():
            self._wakeup.set()
        if len(self.queue) >= self.max_pending:
            with self._drained:
                self._drained.wait_for(lambda: len(self.queue) < self.max_queue or self._closed, timeout=60)

    def open_run(self, run_dir: str | None = None) -> None:
        """Creates the event file of a run now (it is otherwise created with the run's first event)."""
        self.put((OPEN, run_dir))
        self.flush()

    def flush(self) -> None:
        """Returns once everything enqueued before the call has been handed to the OS (or dropped and counted)."""
        if self._closed or not self._thread.is_alive():
            return
        done = threading.Event()
        self.queue.append((FLUSH, None, done))
        self._wakeup.set()
        while not done.wait(0.5) and self._thread.is_alive():
            pass

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._wakeup.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        for path, event_file in self._files.items():
            try:
                event_file.close()
            except OSError as error:  # e.g. NFS reports a late write error here; the descriptor is released anyway
                self._io_failed(path, error)
        self._files.clear()
        _LIVE_WRITERS.discard(self)
        if self.dropped_events:
            logger.warning("SummaryWriter(%s): %d events could not be written and were dropped",
                           self.run_dir, self.dropped_events)

    # ---- writer thread --------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wakeup.wait(self.flush_secs)
            self._wakeup.clear()
            self._drain()
            if self._closed:
                self._drain()
                return

    def _drain(self) -> None:
        batches: dict[str | None, RunBatch] = {}
        queue = self.queue
        while queue:
            item = queue.popleft()
            kind = item[0]
            if kind is FLUSH:  # write what came before it, then release the caller
                self._write(batches)
                batches = {}
                item[2].set()
                continue
            batch = batches.get(item[1])
            if batch is None:
                batch = batches[item[1]] = RunBatch()
            try:
                if kind is SCALAR:
                    batch.bodies.append(scalar(item[2], item[3], item[4], item[5]))
                elif kind is ROWS:
                    self._add_rows(batch, item[2], item[3], item[4], item[5])
                elif kind is BUILD:
                    record = item[2](*item[3])
                    if record.__class__ is list:  # a builder of several events
                        batch.bodies.extend(record)
                    elif record:
                        batch.bodies.append(record)
                elif kind is not OPEN:
                    raise ValueError(f"unknown queue item {kind!r}")
            except Exception as error:  # a bug in an encoder or builder must not stop the writer
                self._report(self.run_dir, f"building an event failed: {error!r}")
                self.dropped_events += kind is not ROWS
        self._write(batches)
        with self._drained:
            self._drained.notify_all()

    def _add_rows(self, batch: RunBatch, tags: tuple[str, ...], rows: Any, steps: list[int],
                  walls: list[float]) -> None:
        """``batch.add_rows``; on failure the events it did not add are counted as dropped."""
        waiting = len(batch)
        try:
            batch.add_rows(tags, rows, steps, walls)
        except Exception:
            self.dropped_events += len(steps) - (len(batch) - waiting)
            raise

    def _write(self, batches: dict[str | None, RunBatch]) -> None:
        for run_dir, batch in batches.items():
            path = self.run_dir if run_dir is None else run_dir
            try:
                payload, events = batch.framed()
            except Exception as error:  # a bug in the encoder must not stop the writer
                self._report(path, f"encoding events failed: {error!r}")
                self.dropped_events += len(batch)
                continue
            event_file = self._files.get(path)
            try:
                if event_file is None:  # NOTE: stored only once its header is written (else closed and removed)
                    event_file = self._files[path] = _EventFile(path, self.filename_suffix,
                                                                frame_records([file_version_event(time.time())]))
                if payload:
                    event_file.append(payload)
            except OSError as error:
                self._io_failed(path, error)
                self.dropped_events += events
                if event_file is not None and not event_file.intact:  # a torn record stays: start a new file
                    event_file.close_quietly()
                    del self._files[path]
                continue
            self.written_events += events
            if self._failing:
                self._io_recovered(path)

    def _io_failed(self, path: str, error: OSError) -> None:
        """Warns once per run while its writes keep failing (not once per flush)."""
        if path not in self._failing:
            self._failing[path] = self.dropped_events
            logger.warning("SummaryWriter cannot write to %s: %s (errno %s); its events are dropped and counted in "
                           "dropped_events until a write succeeds again", path, error.strerror or error, error.errno)

    def _io_recovered(self, path: str) -> None:
        dropped_before = self._failing.pop(path, None)
        if dropped_before is not None:
            logger.warning("SummaryWriter writes to %s again (%d events were dropped meanwhile)", path,
                           self.dropped_events - dropped_before)

    def _report(self, path: str, message: str) -> None:
        if (path, message) not in self._reported:
            self._reported.add((path, message))
            logger.warning("SummaryWriter cannot write to %s: %s; further events that fail are dropped and "
                           "counted in dropped_events", path, message)

    def _after_fork_in_child(self) -> None:
        for event_file in self._files.values():
            event_file.close_quietly()  # the child's copy of the descriptor only
        self._start()


def _close_all_at_exit() -> None:
    for writer in list(_LIVE_WRITERS):
        writer.close()


def _after_fork_in_child() -> None:
    for writer in list(_LIVE_WRITERS):
        writer._after_fork_in_child()


atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
