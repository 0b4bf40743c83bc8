"""TFRecord framing: uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the data."""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
from google_crc32c import value as crc32c

HEADER_BYTES = 12  # uint64 length + uint32 masked crc of the length
FOOTER_BYTES = 4  # uint32 masked crc of the data
_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_LENGTH = struct.Struct("<Q")
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
# Headers already verified (12 bytes -> data length): event lengths repeat, so most headers are a dict hit.
_VERIFIED_HEADERS: dict[bytes, int] = {}
_VERIFIED_HEADERS_MAX = 1 << 16


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _U32


class _Headers(dict):
    """data length -> the 12-byte header (length + its masked CRC), computed once per length."""

    def __missing__(self, length: int) -> bytes:
        if len(self) >= _VERIFIED_HEADERS_MAX:
            self.clear()
        encoded = _LENGTH.pack(length)
        header = self[length] = encoded + _CRC.pack(masked_crc32c(encoded))
        return header


_HEADERS_BY_LENGTH = _Headers()


def record_header(length: int) -> bytes:
    """The 12 bytes before a record of ``length`` data bytes (its length and the length's masked CRC)."""
    return _HEADERS_BY_LENGTH[length]


def frame_record(data: bytes) -> bytes:
    """One framed record: header, data, footer."""
    return b"".join((_HEADERS_BY_LENGTH[len(data)], data, _CRC.pack(masked_crc32c(data))))


def frame_records(datas: list[bytes]) -> bytes:
    """Many framed records at once: the per-record work runs in C (map) and numpy (the CRC masks)."""
    if len(datas) < 8:
        return b"".join(map(frame_record, datas))
    masked = masked_crc32c_array(np.fromiter(map(crc32c, datas), dtype=np.uint64, count=len(datas)))
    parts: list[bytes | None] = [None] * (3 * len(datas))
    parts[0::3] = map(_HEADERS_BY_LENGTH.__getitem__, map(len, datas))
    parts[1::3] = datas
    parts[2::3] = np.frombuffer(masked.astype("<u4").tobytes(), dtype="V4").tolist()
    return b"".join(parts)  # type: ignore[arg-type]


def write_record(file: BinaryIO, data: bytes) -> int:
    """Appends one framed record to a binary file object; returns the number of bytes written."""
    return file.write(frame_record(data))


@dataclass
class RecordScan:
    """What one pass over a buffer found: complete records, where the next pass starts, corrupt ones skipped."""

    records: list[bytes] = field(default_factory=list)
    end_offset: int = 0  # offset of the first byte not consumed (a partial record starts here)
    corrupt: int = 0  # records whose CRC failed and were skipped


def _header_length(buffer: bytes, offset: int) -> int | None:
    """The data length if the 12-byte header at `offset` is intact, else None."""
    header = buffer[offset:offset + HEADER_BYTES]
    length = _VERIFIED_HEADERS.get(header)
    if length is None:
        length, stored_crc = _HEADER.unpack(header)
        if masked_crc32c(header[:8]) != stored_crc:
            return None
        if len(_VERIFIED_HEADERS) < _VERIFIED_HEADERS_MAX:
            _VERIFIED_HEADERS[header] = length
    return length


def _resync(buffer: bytes, offset: int) -> int | None:
    """The next offset after a corrupt header where an intact header starts, or None if none is in the buffer."""
    end = len(buffer) - HEADER_BYTES
    for candidate in range(offset + 1, end + 1):
        if _header_length(buffer, candidate) is not None:
            return candidate
    return None


def scan_records(buffer: bytes, offset: int = 0, max_records: int | None = None) -> RecordScan:
    """Splits `buffer[offset:]` into record payloads, stopping at a truncated record (it may still be written).

    A record whose data CRC fails is skipped; a header whose CRC fails is skipped up to the next intact header.
    """
    scan = RecordScan(end_offset=offset)
    records: list[bytes] = scan.records
    data_ends: list[int] = []
    append_record, append_end = records.append, data_ends.append
    limit = len(buffer)
    header_cache = _VERIFIED_HEADERS
    remaining = -1 if max_records is None else max_records
    while remaining != 0 and offset + HEADER_BYTES <= limit:
        length = header_cache.get(buffer[offset:offset + HEADER_BYTES])
        if length is None:
            length = _header_length(buffer, offset)
            if length is None:
                next_offset = _resync(buffer, offset)
                if next_offset is None:  # the rest may be a corrupt tail or garbage: wait for more bytes
                    break
                scan.corrupt += 1
                offset = next_offset
                continue
        data_end = offset + HEADER_BYTES + length
        if data_end + FOOTER_BYTES > limit:
            break
        append_record(buffer[offset + HEADER_BYTES:data_end])
        append_end(data_end)
        remaining -= 1
        offset = data_end + FOOTER_BYTES
    scan.end_offset = offset
    if records:
        _drop_corrupt(scan, buffer, data_ends)
    return scan


def masked_crc32c_array(crcs: np.ndarray) -> np.ndarray:
    """``masked_crc32c`` of many CRC-32C values at once (uint64 in, uint64 out)."""
    return (((crcs >> np.uint64(15)) | (crcs << np.uint64(17))) + np.uint64(_MASK_DELTA)) & np.uint64(_U32)


def _drop_corrupt(scan: RecordScan, buffer: bytes, data_ends: list[int]) -> None:
    """Checks every data CRC of a scan at once (CRCs in C through map, masks in numpy); drops the failures."""
    footer_starts = np.asarray(data_ends, dtype=np.int64)
    raw = np.frombuffer(buffer, dtype=np.uint8)
    stored = raw[footer_starts[:, None] + np.arange(FOOTER_BYTES)].view("<u4").ravel().astype(np.uint64)
    masked = masked_crc32c_array(np.fromiter(map(crc32c, scan.records), dtype=np.uint64, count=len(scan.records)))
    bad = np.flatnonzero(masked != stored)
    if bad.size:
        good = np.ones(len(scan.records), dtype=bool)
        good[bad] = False
        scan.records[:] = [record for record, keep in zip(scan.records, good.tolist()) if keep]
        scan.corrupt += int(bad.size)


def iter_records(path: str, chunk_bytes: int = 1 << 24) -> Iterator[bytes]:
    """Every intact record payload of a file, read in chunks (corrupt records are skipped)."""
    with open(path, "rb") as file:
        pending = b""
        while chunk := file.read(chunk_bytes):
            buffer = pending + chunk if pending else chunk
            scan = scan_records(buffer)
            yield from scan.records
            pending = buffer[scan.end_offset:]
