"""The records of an intact stretch of a file, found by following their lengths; all data CRCs checked in one pass."""
from __future__ import annotations

import struct
from itertools import repeat

import numpy as np
from google_crc32c import extend as crc32c_extend
from google_crc32c import value as crc32c

from instrumentation.format.record_headers import (FOOTER_BYTES, HEADER_BYTES, MASK_DELTA, headers_intact,
                                                   u32_at)

_RECORD_OVERHEAD = HEADER_BYTES + FOOTER_BYTES
_LENGTH = struct.Struct("<Q")
_ZERO_BLOCK_BYTES = 1 << 16
_ZERO_CRCS_MAX = 1 << 12
_zero_crcs: dict[int, int] = {}
_U32 = np.uint32


def follow_lengths(buffer: bytes, position: int, count: int) -> np.ndarray:
    """Where at most `count` records would start from `position` on if every length read on the way were right
    (int64, in order): the next one starts after the length, its CRC, the data and the data CRC. Stops where
    no length can be read; nothing is checked here (`headers_intact` does, after)."""
    heads: list[int] = []
    append, unpack = heads.append, _LENGTH.unpack_from
    try:
        for _ in repeat(None, count):  # NOTE: the one per-record Python loop: ~0.1 µs a record
            append(position)
            position += unpack(buffer, position)[0] + _RECORD_OVERHEAD
    except (struct.error, OverflowError):  # past the end (a garbage length sends it far past)
        pass
    if heads and heads[-1] > len(buffer):
        heads.pop()  # only the last can lie past the end, possibly past what int64 holds
    return np.fromiter(heads, np.int64, len(heads))


def chained_records(buffer: bytes, position: int, count: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(heads, data lengths, stop): the complete records with intact headers that follow one another from
    `position` (at most `count`), and where the first one that is not such a record starts (`stop`)."""
    heads = follow_lengths(buffer, position, count)
    raw = np.frombuffer(buffer, np.uint8)
    if len(raw) < HEADER_BYTES:
        return heads[:0], heads[:0], position
    intact, lengths = headers_intact(raw, heads)
    good = intact & (heads + _RECORD_OVERHEAD + lengths <= len(raw))
    bad = np.flatnonzero(~good)
    taken = int(bad[0]) if len(bad) else len(heads)
    heads, lengths = heads[:taken], lengths[:taken]
    stop = int(heads[-1] + _RECORD_OVERHEAD + lengths[-1]) if taken else position
    return heads, lengths, stop


def chain_data_intact(buffer: bytes, heads: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether every record of a chain (each starting where the previous one ends) matches its data CRC, in one
    CRC-32C pass over a copy of the chain instead of one call per record.

    In the copy each header is zeroed and each stored CRC is unmasked and turned into the CRC without its
    initial and final inversion (`crc0`, linear: crc(data) ^ crc(zeros of the same length)). A block
    `data + crc0(data)` leaves crc0's register at zero and zeros keep it there, so the whole copy's crc0 is
    zero when every record is intact. A damaged record leaves a non-zero register that no intact record after
    it clears (the register only shifts through them), so damage to any one record is always caught; damage
    to several could cancel with the same 2**-32 odds as a damaged record passing its own CRC. The caller then
    checks each record on its own to find which.
    """
    if len(heads) == 0:
        return True
    start = int(heads[0])
    stop = int(heads[-1] + _RECORD_OVERHEAD + lengths[-1])
    chain = np.frombuffer(buffer, np.uint8, stop - start, start).copy()
    words = np.ndarray((len(chain) - 3,), "<u4", chain, 0, (1,))  # the uint32 at every byte (unaligned)
    relative = heads - start
    footers = relative + HEADER_BYTES + lengths
    rotated = u32_at(chain, footers) - _U32(MASK_DELTA)  # uint32 arithmetic wraps mod 2**32
    stored_crcs = (rotated << _U32(15)) | (rotated >> _U32(17))
    words[footers] = stored_crcs ^ _zero_data_crcs(lengths)
    for word in range(0, HEADER_BYTES, 4):
        words[relative + word] = 0
    return crc32c_extend(0xFFFFFFFF, chain) == 0xFFFFFFFF  # from a zero register, no final inversion


def _zero_data_crcs(lengths: np.ndarray) -> np.ndarray:
    """crc32c of `length` zero bytes for each length (uint32), computed once per distinct length."""
    longest = int(lengths.max())
    if longest < _ZERO_BLOCK_BYTES:  # a table indexed by length: no sort
        table = np.zeros(longest + 1, np.uint32)
        present = np.flatnonzero(np.bincount(lengths, minlength=longest + 1))
        table[present] = [_zero_crc(length) for length in present.tolist()]
        return table[lengths]
    distinct, inverse = np.unique(lengths, return_inverse=True)
    return np.array([_zero_crc(length) for length in distinct.tolist()], np.uint32)[inverse.ravel()]


def _zero_crc(length: int) -> int:
    crc = _zero_crcs.get(length)
    if crc is None:
        if len(_zero_crcs) >= _ZERO_CRCS_MAX:
            _zero_crcs.clear()
        zeros = bytes(min(length, _ZERO_BLOCK_BYTES))
        crc = crc32c(zeros)
        for _ in range(length // _ZERO_BLOCK_BYTES - 1):
            crc = crc32c_extend(crc, zeros)
        if length > _ZERO_BLOCK_BYTES and length % _ZERO_BLOCK_BYTES:
            crc = crc32c_extend(crc, zeros[:length % _ZERO_BLOCK_BYTES])
        crc = _zero_crcs[length] = crc
    return crc
