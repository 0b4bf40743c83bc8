"""EventFileReader: incremental reads of an event file that may still be being written."""
from __future__ import annotations

import os
from collections.abc import Iterator

from instrumentation.format.column_batch import ScalarBatch, ScalarBatchBuilder
from instrumentation.format.decode import RecordDecoder
from instrumentation.format.gcpause import gc_paused
from instrumentation.format.records import FOOTER_BYTES, HEADER_BYTES, scan_records
from instrumentation.format.values import Event

DEFAULT_CHUNK_BYTES = 1 << 24


class EventFileReader:
    """Reads the events appended to `path` since the previous `read()`, keeping its byte offset.

    A truncated last record is left for the next call (the writer may be mid-record). A record whose CRC fails,
    or whose bytes are not an Event, is skipped and counted in `corrupt_records`; the reader never raises for
    the file's content. The file is opened per call, so thousands of readers hold no descriptors.

    `offset` / `corrupt_records` resume a reader where an earlier one stopped (e.g. saved by a cache): the
    offset must be one that an earlier reader of the same file reached (a record boundary).
    """

    def __init__(self, path: str | os.PathLike[str], chunk_bytes: int = DEFAULT_CHUNK_BYTES, *, offset: int = 0,
                 corrupt_records: int = 0) -> None:
        self.path = os.fspath(path)
        self._chunk_bytes = chunk_bytes
        self.offset = 0  # bytes consumed so far
        self.corrupt_records = 0
        self.seek(offset, corrupt_records)

    def seek(self, offset: int, corrupt_records: int | None = None) -> None:
        """Continue reading at byte `offset` (a record boundary); `corrupt_records` resets the count if given."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"EventFileReader offset must be a non-negative int, got {offset!r} for {self.path}")
        if corrupt_records is not None:
            if isinstance(corrupt_records, bool) or not isinstance(corrupt_records, int) or corrupt_records < 0:
                raise ValueError(f"EventFileReader corrupt_records must be a non-negative int, got {corrupt_records!r}")
            self.corrupt_records = corrupt_records
        self.offset = offset

    def read(self, max_records: int | None = None) -> list[Event]:
        """Events since the last call (at most `max_records`); [] when nothing complete was appended."""
        events: list[Event] = []
        decoder = RecordDecoder()
        with gc_paused():
            for records in self._scan(max_records):
                events.extend(decoder.decode(records))
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
            for records in self._scan(max_records):
                builder.add(decoder, records)
        self.corrupt_records += decoder.failures
        return builder.build()

    def _scan(self, max_records: int | None) -> Iterator[list[bytes]]:
        """Record payloads from `offset` on, chunk by chunk, advancing `offset` past each chunk's records."""
        consumed = 0
        with open(self.path, "rb") as file:
            chunk_bytes = self._chunk_bytes
            while max_records is None or consumed < max_records:
                file.seek(self.offset)
                buffer = file.read(chunk_bytes)
                wanted = None if max_records is None else max_records - consumed
                scan = scan_records(buffer, 0, wanted)
                self.corrupt_records += scan.corrupt
                self.offset += scan.end_offset
                consumed += len(scan.records)
                yield scan.records
                if len(buffer) < chunk_bytes:  # reached the end of what is written
                    break
                if scan.end_offset == 0:  # one record larger than the chunk: read it whole next time round
                    length = int.from_bytes(buffer[:8], "little")
                    chunk_bytes = max(chunk_bytes * 2, HEADER_BYTES + length + FOOTER_BYTES)

    def __repr__(self) -> str:
        return f"EventFileReader({self.path!r}, offset={self.offset}, corrupt_records={self.corrupt_records})"
