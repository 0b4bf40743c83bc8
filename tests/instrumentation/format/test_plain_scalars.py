"""The numpy decoder of plain scalar events against protobuf's own parse, on the records that test its edges."""
from __future__ import annotations

import math

import numpy as np
import pytest

from instrumentation.format import EventFileReader, frame_records, protos
from instrumentation.format import plain_scalars as plain_module
from instrumentation.format.plain_scalars import plain_scalars

Value = protos.Summary.Value


def _event(step: int, tag: str, value: float, wall_time: float = 1.7e9, **extra) -> bytes:
    return protos.Event(step=step, wall_time=wall_time, summary=protos.Summary(value=[Value(
        tag=tag, simple_value=value, **extra)])).SerializeToString()


EDGE_RECORDS = [
    _event(1, "loss", 0.5),
    _event(2**62 + 12345, "big/step", -1.0),  # a 9-byte varint
    _event(-3, "negative/step", 2.0),  # a 10-byte varint
    _event(127, "x", math.inf),
    _event(128, "y" * 118, math.nan),  # the longest tag the pattern takes (the summary length stays one byte)
    _event(5, "z" * 119, 1.0),  # one more byte: protobuf's path
    _event(0, "step/zero", 1.0),  # proto3 omits step 0: protobuf's path
    _event(6, "no/wall", 1.0, wall_time=0.0),
    _event(7, "meta", 1.0, metadata=protos.SummaryMetadata(display_name="d")),
    protos.Event(step=8, wall_time=1.0, summary=protos.Summary(
        value=[Value(tag="a", simple_value=1.0), Value(tag="b", simple_value=2.0)])).SerializeToString(),
    protos.Event(step=9, wall_time=1.0, file_version="brain.Event:2").SerializeToString(),
    _event(10, "ünïcode/tag", 3.0),
    _event(11, "loss", 0.25),
    b"\x09" + bytes(8) + b"\x10\x05",  # a prefix of the pattern, then nothing
]


def test_plain_records_decode_exactly_as_protobuf_and_the_rest_are_left_to_it():
    mask, columns = plain_scalars(EDGE_RECORDS)
    assert mask.tolist() == [True, True, True, True, True, False, False, False, False, False, False, True, True, False]
    expected = [protos.Event.FromString(record) for record, plain in zip(EDGE_RECORDS, mask) if plain]
    assert columns.tags == [event.summary.value[0].tag for event in expected]
    assert columns.steps.tolist() == [event.step for event in expected]
    assert columns.wall_times.tolist() == [event.wall_time for event in expected]
    np.testing.assert_array_equal(columns.values, [event.summary.value[0].simple_value for event in expected])
    assert columns.names.count("loss") == 1  # one code per distinct tag


def test_a_tag_that_is_not_utf8_is_left_to_protobuf_which_rejects_it(tmp_path):
    bad = _event(3, "ok", 1.0).replace(b"\x0a\x02ok", b"\x0a\x02\xff\xfe")
    records = [_event(1, "ok", 1.0), bad, _event(2, "ok", 2.0)]
    mask, columns = plain_scalars(records)
    assert mask.tolist() == [True, False, True] and columns.tags == ["ok", "ok"]
    path = tmp_path / "events.out.tfevents.utf8"
    path.write_bytes(frame_records(records))
    reader = EventFileReader(path)
    batch = reader.read_columns()
    assert batch.tags == ["ok", "ok"] and reader.corrupt_records == 1


def test_a_hash_collision_never_merges_two_tags(monkeypatch):
    monkeypatch.setattr(plain_module, "_HASH_MULTIPLIER", np.uint64(0))  # every tag hashes alike
    records = [_event(step, tag, float(step)) for step, tag in enumerate(["a", "b", "a", "c", "b"], start=1)]
    mask, columns = plain_scalars(records)
    assert mask.all() and columns.tags == ["a", "b", "a", "c", "b"]


@pytest.mark.parametrize("chunk_bytes", [200, 1 << 24])
def test_read_columns_in_place_matches_read(tmp_path, chunk_bytes):
    rng = np.random.default_rng(4)
    records = [EDGE_RECORDS[i] for i in rng.integers(0, len(EDGE_RECORDS) - 1, size=400)]
    path = tmp_path / "events.out.tfevents.mixed"
    path.write_bytes(frame_records(records))
    events = EventFileReader(path, chunk_bytes=chunk_bytes).read()
    batch = EventFileReader(path, chunk_bytes=chunk_bytes).read_columns()
    scalars = [(v.tag, v.step, v.wall_time) for e in events for v in e.values if type(v).__name__ == "ScalarValue"]
    assert list(zip(batch.tags, batch.steps.tolist(), batch.wall_times.tolist())) == scalars
    values = [v.value for e in events for v in e.values if type(v).__name__ == "ScalarValue"]
    np.testing.assert_array_equal(batch.values, values)
