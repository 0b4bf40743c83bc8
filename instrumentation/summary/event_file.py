"""The async layer: one background thread builds, frames and appends queued events to a run's event files."""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from instrumentation.format.metadata import event_file_name
from instrumentation.format.records import frame_records
from instrumentation.summary.builders import file_version_event
from instrumentation.summary.scalar_records import ScalarRecordEncoder

logger = logging.getLogger("instrumentation.summary")

Build = Callable[..., bytes]
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
    """Queues (run_dir, build, args) items on the calling thread; a daemon thread turns them into records
    (`build` returns one serialized event, b"" for none, or a list of them).

    `enqueue` costs one deque append. The thread writes whatever is queued every `flush_secs`, as soon as
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
        self.queue: deque[tuple[str | None, Build | None, tuple[Any, ...]]] = deque()
        self._start()
        _LIVE_WRITERS.add(self)

    def _start(self) -> None:
        self.queue.clear()  # NOTE: cleared, never replaced: SummaryWriter holds `queue.append` for its hot path
        self._wakeup = threading.Event()
        self._drained = threading.Condition()
        self._files: dict[str, _EventFile] = {}
        self._scalar_encoders: dict[str | None, ScalarRecordEncoder] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="flowscope-summary-writer", daemon=True)
        self._thread.start()

    # ---- calling thread -------------------------------------------------------------------------------------
    def enqueue(self, run_dir: str | None, build: Build, *args: Any) -> None:
        """Queues `build(*args)` (it returns the serialized event) for the file of `run_dir` (None: the main run)."""
        queue = self.queue
        queue.append((run_dir, build, args))
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
        self.enqueue(run_dir, _no_event)
        self.flush()

    def flush(self) -> None:
        """Returns once everything enqueued before the call has been handed to the OS (or dropped and counted)."""
        if self._closed or not self._thread.is_alive():
            return
        done = threading.Event()
        self.queue.append((None, None, (done,)))
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
        batches: dict[str | None, _Pending] = {}
        queue = self.queue
        while queue:
            run_dir, build, args = queue.popleft()
            if build is None:  # a flush marker: write what came before it, then release the caller
                self._write(batches)
                batches = {}
                args[0].set()
                continue
            batch = batches.get(run_dir)
            if batch is None:
                batch = batches[run_dir] = _Pending(self._scalars(run_dir))
            if build is scalar_events:  # one step of SummaryWriter.add_scalar_dict
                batch.scalars.add_many(*args)
                continue
            if build is scalar_rows:  # SummaryWriter.add_scalar_rows
                batch.scalars.add_rows(*args)
                continue
            if build is scalar_column:  # SummaryWriter.add_scalar_column
                batch.scalars.add_column(*args)
                continue
            if build is scalar_event:
                batch.scalars.add(*args)
                continue
            try:
                record = build(*args)
            except Exception as error:  # a bug in a builder must not stop the writer
                self._report(self.run_dir, f"building an event failed: {error!r}")
                self.dropped_events += 1
                continue
            if record.__class__ is list:  # a builder of several events
                batch.add_records(record)
            elif record:
                batch.add_records([record])
        self._write(batches)
        with self._drained:
            self._drained.notify_all()

    def _scalars(self, run_dir: str | None) -> ScalarRecordEncoder:
        """The run's scalar encoder (it keeps each tag's record layout across batches)."""
        encoder = self._scalar_encoders.get(run_dir)
        if encoder is None:
            encoder = self._scalar_encoders[run_dir] = ScalarRecordEncoder()
        return encoder

    def _write(self, batches: dict[str | None, _Pending]) -> None:
        for run_dir, batch in batches.items():
            path = self.run_dir if run_dir is None else run_dir
            try:
                payload, events = batch.framed()
            except Exception as error:  # a bug in the encoder must not stop the writer
                self._report(path, f"encoding events failed: {error!r}")
                self.dropped_events += batch.events + len(batch.records) + len(batch.scalars)
                batch.scalars.discard()
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


def _no_event() -> bytes:
    return b""


def scalar_event(tag: str, value: float, step: int, wall_time: float) -> bytes:
    """Queue marker of one scalar event (``enqueue(run_dir, scalar_event, tag, value, step, wall_time)``): the
    writer thread encodes queued scalars together (``ScalarRecordEncoder``); called directly, it builds one."""
    return ScalarRecordEncoder.one(tag, value, step, wall_time)


def scalar_events(tags: list[str], values: list[float], step: int, wall_time: float) -> bytes:
    """Queue marker of one step's scalars (aligned ``tags`` and ``values``: one Event holding them all), like
    ``scalar_event``."""
    return ScalarRecordEncoder.many(tags, values, step, wall_time)


def scalar_rows(tags: tuple[str, ...], rows: list[list[float]], steps: list[int], walls: list[float]) -> list[bytes]:
    """Queue marker of several steps' scalars (one event per row), like ``scalar_events``."""
    return [ScalarRecordEncoder.many(list(tags), row, step, wall) for row, step, wall in zip(rows, steps, walls)]


def scalar_column(tag: str, values: list[float], steps: list[int], walls: list[float]) -> list[bytes]:
    """Queue marker of one tag's values at several steps (one event per value), like ``scalar_event``."""
    return [ScalarRecordEncoder.one(tag, value, step, wall) for value, step, wall in zip(values, steps, walls)]


class _Pending:
    """One run's framed bytes waiting for the next write, in queue order: records built one by one and the
    scalars collected in the run's encoder in between."""

    __slots__ = ("parts", "records", "scalars", "events")

    def __init__(self, scalars: ScalarRecordEncoder) -> None:
        self.parts: list[bytes] = []
        self.records: list[bytes] = []
        self.scalars = scalars
        self.events = 0

    def add_records(self, records: list[bytes]) -> None:
        if len(self.scalars):
            self._take_scalars()
        self.records.extend(records)

    def _take_scalars(self) -> None:
        if self.records:
            self.parts.append(frame_records(self.records))
            self.events += len(self.records)
            self.records = []
        self.events += len(self.scalars)
        self.parts.append(self.scalars.take())

    def framed(self) -> tuple[bytes, int]:
        """Everything pending as framed bytes and the number of events in them."""
        if len(self.scalars):
            self._take_scalars()
        if self.records:
            self.parts.append(frame_records(self.records))
            self.events += len(self.records)
        return b"".join(self.parts), self.events


def _close_all_at_exit() -> None:
    for writer in list(_LIVE_WRITERS):
        writer.close()


def _after_fork_in_child() -> None:
    for writer in list(_LIVE_WRITERS):
        writer._after_fork_in_child()


atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
