"""Plain scalar Events decoded with numpy: every record of a batch at once, tags as codes, no per-point objects."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A plain scalar Event, as every protobuf serializer writes it (fields in number order, our writer included):
#   0x09 wall_time(8)  0x10 step(varint)  0x2a len  [Summary: 0x0a len  [Value: 0x0a len tag  0x15 simple_value(4)]]
# Every byte is accounted for and every length must agree with the record's, so a record matching the pattern
# decodes exactly as protobuf would; anything else (step 0 or wall time 0, which proto3 omits, several values,
# metadata, histograms, tags of 119 bytes or more) is left to the protobuf path.
_WALL_TIME_KEY, _STEP_KEY, _SUMMARY_KEY, _VALUE_KEY, _TAG_KEY, _SIMPLE_VALUE_KEY = 0x09, 0x10, 0x2A, 0x0A, 0x0A, 0x15
_MAX_VARINT_BYTES = 10
_PAD_BYTES = 32  # zeros after the joined records, so fixed-width reads past a short last record stay in bounds
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True, slots=True)
class TaggedColumns:
    """Scalar points as columns: `names[codes[i]]` is the tag of point i; `per_event` the values per record when
    a record holds several (None: one each)."""

    names: list[str]
    codes: np.ndarray  # int32
    steps: np.ndarray  # int64
    wall_times: np.ndarray  # float64
    values: np.ndarray  # float64
    per_event: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def from_lists(cls, tags: list[str], steps: list[int], wall_times: list[float], values: list[float],
                   per_event: np.ndarray | None = None) -> TaggedColumns:
        codes_by_tag = {tag: code for code, tag in enumerate(dict.fromkeys(tags))}
        return cls(list(codes_by_tag), np.fromiter(map(codes_by_tag.__getitem__, tags), np.int32, len(tags)),
                   np.asarray(steps, np.int64), np.asarray(wall_times, np.float64), np.asarray(values, np.float64),
                   per_event)

    def rows(self, start: int, stop: int) -> TaggedColumns:
        """Points start..stop-1 (only for columns of one value per record)."""
        return TaggedColumns(self.names, self.codes[start:stop], self.steps[start:stop],
                             self.wall_times[start:stop], self.values[start:stop])

    @property
    def tags(self) -> list[str]:
        names = self.names
        return [names[code] for code in self.codes.tolist()]


def _view(buffer: bytes, dtype: str, positions: np.ndarray) -> np.ndarray:
    """The little-endian `dtype` values starting at each byte position of `buffer` (unaligned reads)."""
    itemsize = np.dtype(dtype).itemsize
    return np.ndarray((len(buffer) - itemsize + 1,), dtype, buffer, 0, (1,))[positions]


def plain_scalars(records: list[bytes]) -> tuple[np.ndarray, TaggedColumns]:
    """(mask, columns): which records are plain scalar Events (bool per record), and their points in order."""
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    return plain_scalars_at(b"".join(records) + bytes(_PAD_BYTES), np.cumsum(lengths) - lengths, lengths)


def plain_scalars_at(buffer: bytes, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, TaggedColumns]:
    """`plain_scalars` of the records `buffer[starts[i]:starts[i] + lengths[i]]`, read where they lie (e.g. in the
    chunk that was scanned: no copy). At least 9 bytes must follow each record in `buffer` (a TFRecord footer and
    the next header, or padding): a tag's last 8-byte word is read whole."""
    ends = starts + lengths
    raw = np.frombuffer(buffer, np.uint8)
    last = len(raw) - 1

    def at(positions: np.ndarray) -> np.ndarray:
        return raw[np.minimum(positions, last)]  # a short record's fields may lie past its end: never past the buffer

    ok = (lengths >= 19) & (at(starts) == _WALL_TIME_KEY) & (at(starts + 9) == _STEP_KEY)
    steps, varint_bytes = _varints(raw, starts + 10)
    ok &= varint_bytes > 0
    summary = starts + 10 + varint_bytes  # the summary's key
    summary_bytes = at(summary + 1).astype(np.int64)
    value_bytes = at(summary + 3).astype(np.int64)
    tag_bytes = at(summary + 5).astype(np.int64)
    tag_starts = summary + 6
    ok &= (at(summary) == _SUMMARY_KEY) & (summary_bytes < 0x80) & (summary + 2 + summary_bytes == ends)
    ok &= (at(summary + 2) == _VALUE_KEY) & (value_bytes == summary_bytes - 2)
    ok &= (at(summary + 4) == _TAG_KEY) & (tag_bytes == value_bytes - 7)
    ok &= at(tag_starts + tag_bytes) == _SIMPLE_VALUE_KEY
    plain = np.flatnonzero(ok)
    names, codes, tag_ok = _tag_codes(buffer, tag_starts[plain], tag_bytes[plain])
    if not tag_ok.all():  # a tag that is not UTF-8: protobuf rejects the record, so the slow path counts it
        ok[plain[~tag_ok]] = False
        plain, codes = plain[tag_ok], codes[tag_ok]
    columns = TaggedColumns(names, codes, steps[plain], _view(buffer, "<f8", starts[plain] + 1),
                            _view(buffer, "<f4", tag_starts[plain] + tag_bytes[plain] + 1).astype(np.float64))
    return ok, columns


def _varints(raw: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value as int64, bytes used; 0 if longer than 10) of the varint at each position, a byte at a time for the
    positions whose varint goes on (steps below 16384 take two passes)."""
    values = np.zeros(len(positions), np.uint64)
    used = np.zeros(len(positions), np.int64)
    active = np.arange(len(positions))
    for index in range(_MAX_VARINT_BYTES):
        if active.size == 0:
            break
        byte = raw[np.minimum(positions[active] + index, len(raw) - 1)]
        values[active] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * index)
        last = byte < 0x80
        used[active[last]] = index + 1
        active = active[~last]
    return values.view(np.int64), used


def _tag_codes(buffer: bytes, starts: np.ndarray, lengths: np.ndarray
               ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, code per tag, whether each tag is valid UTF-8): the tags grouped by their bytes, exactly.

    Each tag's bytes are read as 8-byte words (masked to its length) and hashed; codes come from the distinct
    hashes, and every tag is then compared word by word with its code's first tag, so a hash collision can never
    merge two tags (such a batch is grouped by sorting the words instead).
    """
    if len(starts) == 0:
        return [], np.empty(0, np.int32), np.empty(0, bool)
    words = int(lengths.max() + 7) // 8
    columns = []
    for word in range(words):
        remaining = np.clip(lengths - 8 * word, 0, 8).astype(np.uint64)
        mask = np.where(remaining == 8, np.uint64(2**64 - 1),
                        (np.uint64(1) << (remaining * np.uint64(8))) - np.uint64(1))
        # a word that holds part of a tag ends at most 7 bytes past it (in the record, footer or padding); a word
        # past a shorter tag is masked to zero, so where it is read from only has to lie in the buffer
        columns.append(_view(buffer, "<u8", np.minimum(starts + 8 * word, len(buffer) - 8)) & mask)
    hashes = lengths.astype(np.uint64)
    for column in columns:
        hashes = (hashes ^ column) * _HASH_MULTIPLIER
        hashes ^= hashes >> np.uint64(29)
    distinct, first, codes = _distinct(hashes)  # first: a representative of each code
    same = np.ones(len(hashes), bool)
    for column in columns:
        same &= column == column[first][codes]
    if not same.all():  # a collision: group by the words themselves
        stacked = np.stack([lengths.astype(np.uint64), *columns], axis=1)
        _, first, codes = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    names: list[str | None] = []
    for start, length in zip(starts[first].tolist(), lengths[first].tolist()):
        try:
            names.append(buffer[start:start + length].decode("utf-8"))
        except UnicodeDecodeError:
            names.append(None)
    valid = np.array([name is not None for name in names], bool)
    codes = codes.astype(np.int32).ravel()
    tag_ok = valid[codes]
    if not valid.all():  # number the valid names densely (the invalid tags' records are dropped by the caller)
        codes = (np.cumsum(valid) - 1).astype(np.int32)[codes]
    return [name for name in names if name is not None], codes, tag_ok


def _distinct(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct values, index of an element holding each, code of each element) — as np.unique with
    return_index/return_inverse, but a search into the few distinct values instead of a sort of all of them."""
    distinct = np.unique(hashes[:1024])
    while True:
        codes = np.minimum(np.searchsorted(distinct, hashes), len(distinct) - 1)
        missing = distinct[codes] != hashes
        if not missing.any():
            break
        distinct = np.union1d(distinct, hashes[missing])
    representative = np.empty(len(distinct), np.int64)
    representative[codes] = np.arange(len(hashes))  # whichever write wins, it is an element with that code
    return distinct, representative, codes
