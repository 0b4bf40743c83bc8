"""EventFileReader: incremental reads of an event file that may still be being written."""
from __future__ import annotations

import os
from collections.abc import Iterator

from instrumentation.format.column_batch import ScalarBatch, ScalarBatchBuilder
from instrumentation.format.confined import open_regular
from instrumentation.format.decode import RecordDecoder
from instrumentation.format.gcpause import gc_paused
from instrumentation.format.records import RecordScan, SkippedBytes, scan_records
from instrumentation.format.values import Event

DEFAULT_CHUNK_BYTES = 1 << 24
_MIN_READ_BYTES = 1 << 16


class EventFileReader:
    """Reads the events appended to `path` since the previous `read()`, keeping its byte offset.

    A truncated last record is left for the next call (the writer may be mid-record). Bytes that can never
    become a record are skipped: a record whose data CRC fails, a header whose CRC fails or whose length exceeds
    MAX_RECORD_BYTES, garbage or a zero-filled tail (found at file-read speed). Each skipped span counts once in
    `corrupt_records`, as do records whose bytes are not an Event, and `problem` says in one line where the
    first span is and why (None while the file is sound). The reader never raises for the file's content and
    never allocates from a length it has not verified. The file is opened per call, so thousands of readers hold
    no descriptors.

    `offset` / `corrupt_records` / `problem` resume a reader where an earlier one stopped (e.g. saved by a
    cache): the offset should be one that an earlier reader of the same file reached (a record boundary; any
    other offset reads as a corrupt span up to the next record).
    """

    def __init__(self, path: str | os.PathLike[str], chunk_bytes: int = DEFAULT_CHUNK_BYTES, *, offset: int = 0,
                 corrupt_records: int = 0, problem: str | None = None) -> None:
        self.path = os.fspath(path)
        self._chunk_bytes = chunk_bytes
        self.offset = 0  # bytes consumed so far
        self.corrupt_records = 0
        self._earlier_problem: str | None = None  # handed over by `seek` (a reader that stopped earlier)
        self._first_skip: SkippedBytes | None = None
        self._last_skip_stop = -1
        self._skips = 0
        self._skipped_bytes = 0
        self._record_bytes = 64.0  # bytes per record seen last (sizes reads for max_records)
        self.seek(offset, corrupt_records, problem)

    def seek(self, offset: int, corrupt_records: int | None = None, problem: str | None = None) -> None:
        """Continue reading at byte `offset` (a record boundary); `corrupt_records` resets the count if given,
        and `problem` the description of what an earlier reader skipped."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"EventFileReader offset must be a non-negative int, got {offset!r} for {self.path}")
        if corrupt_records is not None:
            if isinstance(corrupt_records, bool) or not isinstance(corrupt_records, int) or corrupt_records < 0:
                raise ValueError(f"EventFileReader corrupt_records must be a non-negative int, got {corrupt_records!r}")
            self.corrupt_records = corrupt_records
        if problem is not None and not isinstance(problem, str):
            raise ValueError(f"EventFileReader problem must be a str or None, got {problem!r}")
        self._earlier_problem = problem
        self._first_skip, self._last_skip_stop, self._skips, self._skipped_bytes = None, -1, 0, 0
        self.offset = offset

    @property
    def problem(self) -> str | None:
        """One line naming the first span of the file that was skipped and why, or None if nothing was."""
        if self._first_skip is None:
            return self._earlier_problem
        first = self._first_skip
        line = f"bytes {first.start:,}–{first.stop:,} ({_size(first.stop - first.start)}) skipped: {first.reason}"
        if self._skips > 1:
            line += f"; {self._skips - 1:,} more span(s), {_size(self._skipped_bytes)} skipped in all"
        return line if self._earlier_problem is None else f"{self._earlier_problem}; then {line}"

    def read(self, max_records: int | None = None) -> list[Event]:
        """Events since the last call (at most `max_records`); [] when nothing complete was appended."""
        events: list[Event] = []
        decoder = RecordDecoder()
        with gc_paused():
            for scan in self._scan(max_records):
                events.extend(decoder.decode(scan.records, (scan.buffer, scan.data_starts, scan.data_lengths)))
        self.corrupt_records += decoder.failures
        return events

    def read_columns(self, max_records: int | None = None) -> ScalarBatch:
        """The same records as `read()`, with every scalar point as numpy columns instead of objects.

        About twice as fast as `read()` for scalar-heavy files (no ScalarValue/Event objects are built for plain
        scalar records); `records == 0` when nothing complete was appended.
        """
        builder = ScalarBatchBuilder()
        decoder = RecordDecoder()
        with gc_paused():
            for scan in self._scan(max_records):
                builder.add(decoder, scan.records, (scan.buffer, scan.data_starts, scan.data_lengths))
        self.corrupt_records += decoder.failures
        return builder.build()

    def _scan(self, max_records: int | None) -> Iterator[RecordScan]:
        """The records from `offset` on, chunk by chunk, advancing `offset` past each chunk's records."""
        consumed = 0
        with open_regular(self.path) as file:  # a FIFO or device in its place is refused, never blocks
            chunk_bytes = self._chunk_bytes
            buffer, scan = b"", None
            while max_records is None or consumed < max_records:
                file.seek(self.offset)
                del buffer, scan  # one chunk in memory at a time
                left_bytes = max(0, os.fstat(file.fileno()).st_size - self.offset)
                wanted = None if max_records is None else max_records - consumed
                # NOTE: read() allocates the size asked for before reading: never ask for more than the file holds,
                # nor (with max_records) much more than the records wanted take, judged from the last chunk
                request = min(chunk_bytes, left_bytes, self._bytes_for(wanted))
                buffer = file.read(request)
                scan = scan_records(buffer, 0, wanted)
                self._note_skipped(scan.skipped)
                self.offset += scan.end_offset
                consumed += len(scan.records)
                if scan.records:
                    self._record_bytes = scan.end_offset / len(scan.records)
                yield scan
                if request >= left_bytes or len(buffer) < request:  # reached the end of what is written
                    break
                if scan.end_offset == 0:  # nothing consumed: a record larger than this read
                    # a verified, bounded header announced it: read it whole next time
                    chunk_bytes = max(self._chunk_bytes, scan.wanted_bytes, 2 * request)
                    self._record_bytes = float(chunk_bytes)
                else:
                    chunk_bytes = self._chunk_bytes

    def _bytes_for(self, records: int | None) -> int:
        """How many bytes to read for `records` more records (all that is left when None)."""
        if records is None:
            return 1 << 62
        return max(_MIN_READ_BYTES, int(records * self._record_bytes * 1.25))

    def _note_skipped(self, skipped: list[SkippedBytes]) -> None:
        """Counts each skipped span once: a span that continues the previous one (across chunks) extends it."""
        for span in skipped:
            start, stop = span.start + self.offset, span.stop + self.offset
            self._skipped_bytes += stop - start
            if start == self._last_skip_stop:
                if self._skips == 1 and self._first_skip is not None:
                    self._first_skip = SkippedBytes(self._first_skip.start, stop, self._first_skip.reason)
            else:
                self._skips += 1
                self.corrupt_records += 1
                if self._first_skip is None:
                    self._first_skip = SkippedBytes(start, stop, span.reason)
            self._last_skip_stop = stop

    def __repr__(self) -> str:
        return f"EventFileReader({self.path!r}, offset={self.offset}, corrupt_records={self.corrupt_records})"


def _size(count: int) -> str:
    """A byte count for people: '12 bytes', '3.5 KiB', '5.4 MiB'."""
    if count < 1024:
        return f"{count} byte" + ("" if count == 1 else "s")
    value = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
