"""EventFileReader: incremental reads of an event file that may still be being written."""
from __future__ import annotations

import gc
import os

from instrumentation.format.decode import RecordDecoder
from instrumentation.format.records import FOOTER_BYTES, HEADER_BYTES, scan_records
from instrumentation.format.values import Event

DEFAULT_CHUNK_BYTES = 1 << 24


class EventFileReader:
    """Reads the events appended to `path` since the previous `read()`, keeping its byte offset.

    A truncated last record is left for the next call (the writer may be mid-record). A record whose CRC fails,
    or whose bytes are not an Event, is skipped and counted in `corrupt_records`; the reader never raises for
    the file's content. The file is opened per call, so thousands of readers hold no descriptors.
    """

    def __init__(self, path: str | os.PathLike[str], chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        self.path = os.fspath(path)
        self.offset = 0  # bytes consumed so far
        self.corrupt_records = 0
        self._chunk_bytes = chunk_bytes

    def read(self, max_records: int | None = None) -> list[Event]:
        """Events since the last call (at most `max_records`); [] when nothing complete was appended."""
        events: list[Event] = []
        with open(self.path, "rb") as file:
            chunk_bytes = self._chunk_bytes
            while max_records is None or len(events) < max_records:
                file.seek(self.offset)
                buffer = file.read(chunk_bytes)
                wanted = None if max_records is None else max_records - len(events)
                scan = scan_records(buffer, 0, wanted)
                events.extend(self._decode(scan.records))
                self.corrupt_records += scan.corrupt
                self.offset += scan.end_offset
                if len(buffer) < chunk_bytes:  # reached the end of what is written
                    break
                if scan.end_offset == 0:  # one record larger than the chunk: read it whole next time round
                    length = int.from_bytes(buffer[:8], "little")
                    chunk_bytes = max(chunk_bytes * 2, HEADER_BYTES + length + FOOTER_BYTES)
        return events

    def _decode(self, records: list[bytes]) -> list[Event]:
        decoder = RecordDecoder()
        # NOTE: building ~10^6 small objects with the cyclic GC on costs about twice as much (each gen-0 pass
        # walks the survivors); they hold no cycles, so collection is paused for the batch.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            events = decoder.decode(records)
        finally:
            if gc_was_enabled:
                gc.enable()
        self.corrupt_records += decoder.failures
        return events

    def __repr__(self) -> str:
        return f"EventFileReader({self.path!r}, offset={self.offset}, corrupt_records={self.corrupt_records})"
