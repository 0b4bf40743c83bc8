"""Batch decoding of plain scalar events: the protobuf runtime parses a whole batch into columns in three calls."""
from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from instrumentation.format import protos
from instrumentation.format.protos import BYTES, DOUBLE, FLOAT, INT64, STRING, field, message

# NOTE: protobuf defines parsing the concatenation of serialized messages as merging them, and merging appends
# repeated fields. These "column views" declare Event / Summary / Summary.Value's fields as repeated (parsers
# accept the unpacked singular encoding for repeated scalars), so parsing `b"".join(records)` yields one
# column per field. A column is aligned with the records only if every record set that field exactly once:
# proto3 omits zero/empty values (step 0, the file_version event) and other kinds of values leave gaps, which
# the length checks below detect; such a batch is split and its odd records decoded one by one.
_CLASSES = protos.build_file("flowscope/tensorboard/event_columns.proto", messages=[
    message("EventColumns", [
        field("wall_time", 1, DOUBLE, repeated=True), field("step", 2, INT64, repeated=True),
        field("summary", 5, BYTES, repeated=True)]),
    message("SummaryColumns", [field("value", 1, BYTES, repeated=True)]),
    message("ValueColumns", [
        field("tag", 1, STRING, repeated=True), field("simple_value", 2, FLOAT, repeated=True)]),
])
_EventColumns = _CLASSES["EventColumns"].FromString
_SummaryColumns = _CLASSES["SummaryColumns"].FromString
_ValueColumns = _CLASSES["ValueColumns"].FromString


def scalar_columns(records: list[bytes]) -> tuple[list[str], list[int], list[float], list[float]] | None:
    """(tags, steps, wall_times, values) if every record is an Event holding exactly one `simple_value` with a
    non-zero step and wall time; None otherwise (then decode the records one by one)."""
    try:
        return _scalar_columns(records)
    except DecodeError:  # some record is not a valid Event: the caller finds which one by one
        return None


def _scalar_columns(records: list[bytes]) -> tuple[list[str], list[int], list[float], list[float]] | None:
    count = len(records)
    events: Any = _EventColumns(b"".join(records))
    summaries = events.summary
    if not (len(events.step) == len(events.wall_time) == len(summaries) == count and all(summaries)):
        return None
    value_payloads = _SummaryColumns(b"".join(summaries)).value
    if len(value_payloads) != count:
        return None
    values: Any = _ValueColumns(b"".join(value_payloads))
    if not (len(values.tag) == len(values.simple_value) == count):
        return None
    return list(values.tag), list(events.step), list(events.wall_time), list(values.simple_value)


# Leading/trailing bytes of a plain scalar Event as every protobuf serializer writes it (fields in number order):
# wall_time (field 1, fixed64) first, step (field 2, varint) right after its 8 bytes, and the Summary.Value's
# simple_value (field 2, fixed32) as the record's last 5 bytes.
_WALL_TIME_KEY, _STEP_KEY, _SIMPLE_VALUE_KEY = 0x09, 0x10, 0x15
_MIN_SCALAR_BYTES = 16


def plain_scalar_mask(records: list[bytes]) -> np.ndarray:
    """Which records look like plain scalar events (a bool per record), from three bytes each, vectorised.

    Only a hint for splitting a mixed batch: runs of candidates are still checked by `scalar_columns`, so a
    wrong guess costs speed, never correctness. Step 0 / wall time 0 (proto3 omits them) read as not plain.
    """
    count = len(records)
    lengths = np.fromiter(map(len, records), np.int64, count)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    joined = np.frombuffer(b"".join(records), np.uint8)
    long_enough = lengths >= _MIN_SCALAR_BYTES
    if not long_enough.any():
        return long_enough
    starts, ends = starts[long_enough], ends[long_enough]
    mask = np.zeros(count, bool)
    mask[long_enough] = ((joined[starts] == _WALL_TIME_KEY) & (joined[starts + 9] == _STEP_KEY)
                         & (joined[ends - 5] == _SIMPLE_VALUE_KEY))
    return mask


def runs_of(mask: np.ndarray) -> list[tuple[int, int, bool]]:
    """Maximal runs of equal values of a bool mask as (start, stop, value), in order."""
    if len(mask) == 0:
        return []
    bounds = [0, *(np.flatnonzero(mask[1:] != mask[:-1]) + 1).tolist(), len(mask)]
    flags = mask[bounds[:-1]].tolist()
    return [(lo, hi, flag) for lo, hi, flag in zip(bounds[:-1], bounds[1:], flags)]
