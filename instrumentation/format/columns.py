"""Batch decoding of plain scalar events: the protobuf runtime parses a whole batch into columns in three calls."""
from __future__ import annotations

from typing import Any

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
