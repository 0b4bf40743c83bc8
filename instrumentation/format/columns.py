"""Batch decoding of plain scalar events: the protobuf runtime parses a whole batch into columns in three calls."""
from __future__ import annotations

from typing import Any

import numpy as np

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


Columns = tuple[list[str], list[int], list[float], list[float], "np.ndarray | None"]


def scalar_columns(records: list[bytes]) -> Columns | None:
    """(tags, steps, wall_times, values, values_per_event), a row per value, if every record is an Event holding only
    `simple_value`s (one, or several as TF1 merged summaries and `add_scalar_rows` write them) with a non-zero step
    and wall time; `values_per_event` is None when each holds one. None otherwise (then decode the records one by
    one)."""
    try:
        return _scalar_columns(records)
    except Exception:  # NOTE: some record is not a valid Event (any error): the caller finds which one by one
        return None


def _scalar_columns(records: list[bytes]) -> Columns | None:
    count = len(records)
    events: Any = _EventColumns(b"".join(records))
    summaries = events.summary
    if not (len(events.step) == len(events.wall_time) == len(summaries) == count and all(summaries)):
        return None
    value_payloads = _SummaryColumns(b"".join(summaries)).value
    values: Any = _ValueColumns(b"".join(value_payloads))
    total = len(value_payloads)
    if not (len(values.tag) == len(values.simple_value) == total >= count):
        return None
    steps, wall_times, per_event = list(events.step), list(events.wall_time), None
    if total > count:  # several values per event: spread each event's step and wall time over its values
        per_event = _values_per_summary(summaries, value_payloads)
        if per_event is None:
            return None
        steps = np.repeat(np.asarray(steps, np.int64), per_event).tolist()
        wall_times = np.repeat(np.asarray(wall_times, np.float64), per_event).tolist()
    return list(values.tag), steps, wall_times, list(values.simple_value), per_event


def _values_per_summary(summaries: list[bytes], value_payloads: list[bytes]) -> np.ndarray | None:
    """How many of the (concatenated) values each summary holds, from their encoded sizes; None if the summaries
    hold anything but values (their sizes then do not add up)."""
    payload_bytes = np.fromiter(map(len, value_payloads), np.int64, len(value_payloads))
    encoded = 1 + payload_bytes + 1 + (payload_bytes[:, None] >= _VARINT_BOUNDS[None, :]).sum(axis=1)  # key, size, data
    value_ends = np.cumsum(encoded)
    summary_ends = np.cumsum(np.fromiter(map(len, summaries), np.int64, len(summaries)))
    last_values = np.searchsorted(value_ends, summary_ends)
    if last_values[-1] >= len(value_ends) or not np.array_equal(value_ends[last_values], summary_ends):
        return None
    return np.diff(last_values, prepend=-1)


_VARINT_BOUNDS = np.array([1 << (7 * k) for k in range(1, 9)], dtype=np.int64)  # lengths: < 2**63


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
