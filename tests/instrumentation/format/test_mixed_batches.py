"""Mixed batches (scalars interleaved with histograms, text, step 0, tensors) decode like one record at a time;
`read_columns()` holds the same points; a reader resumes from a saved offset."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.histogram.summary_v2 import histogram_pb
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.plugins.text.summary_v2 import text_pb

from instrumentation.format import EventFileReader, HistogramValue, ScalarValue, iter_records
from instrumentation.format.decode import RecordDecoder, decode_event, parse_event


def _scalar(tag: str, value: float) -> summary_pb2.Summary:
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])


def _write_mixed_log(write, steps: int = 2500, seed: int = 0) -> None:
    """Per step: 8 plain scalars, an event of 1 to 5 scalars (add_scalar_rows' form), and every few steps histograms,
    a text, a TF2 tensor scalar, a 2-value event, an event holding a scalar and a histogram."""
    rng = np.random.default_rng(seed)
    for step in range(steps):
        for t in range(8):
            write(event_pb2.Event(step=step, wall_time=1e9 + step, summary=_scalar(f"m{t}", float(rng.normal()))))
        write(event_pb2.Event(step=step, wall_time=1e9 + step + 0.5, summary=summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=f"d{k}", simple_value=float(rng.normal())) for k in range(1 + step % 5)])))
        if step % 110 == 4:
            mixed = histogram_pb("hm", rng.normal(size=10))
            mixed.value.insert(0, summary_pb2.Summary.Value(tag="sm", simple_value=float(step)))
            write(event_pb2.Event(step=step, wall_time=1e9 + step, summary=mixed))
        if step % 3 == 0:
            for h in range(2):
                write(event_pb2.Event(step=step, wall_time=1e9 + step,
                                      summary=histogram_pb(f"h{h}", rng.normal(size=40))))
        if step % 50 == 1:
            write(event_pb2.Event(step=step, wall_time=1e9 + step, summary=text_pb("note", f"step {step}")))
        if step % 70 == 2:  # a TF2 scalar (tensor) for a tag that is otherwise written plain: order must hold
            write(event_pb2.Event(step=step, wall_time=1e9 + step, summary=scalar_pb("m3x", float(step))))
        if step % 90 == 3:
            write(event_pb2.Event(step=step, wall_time=1e9 + step, summary=summary_pb2.Summary(value=[
                summary_pb2.Summary.Value(tag="a", simple_value=1.5),
                summary_pb2.Summary.Value(tag="b", simple_value=2.5)])))


def _one_by_one(path: str) -> list:
    return [decode_event(parse_event(record)) for record in iter_records(path)]


def _same_value(ours, expected) -> bool:
    if type(ours) is not type(expected):
        return False
    if isinstance(ours, HistogramValue):
        return (ours.tag, ours.step, ours.wall_time, ours.min, ours.max, ours.num, ours.sum, ours.sum_squares) == (
            expected.tag, expected.step, expected.wall_time, expected.min, expected.max, expected.num, expected.sum,
            expected.sum_squares) and np.array_equal(ours.edges, expected.edges) and np.array_equal(ours.counts,
                                                                                          expected.counts)
    if hasattr(ours, "tensor"):
        return (ours.tag, ours.step, ours.plugin_name, ours.content) == (expected.tag, expected.step,
                                                                          expected.plugin_name, expected.content)
    return ours == expected


def test_mixed_batches_decode_like_one_by_one_and_mostly_columnar(tensorboard_writer, monkeypatch):
    write, path = tensorboard_writer
    _write_mixed_log(write)
    singles = []
    original = RecordDecoder._one_by_one
    monkeypatch.setattr(RecordDecoder, "_one_by_one", lambda self, records, single: (
        singles.append(len(records)), original(self, records, single)))
    fast = EventFileReader(path()).read()
    slow = _one_by_one(path())
    assert len(fast) == len(slow) > 20_000
    for ours, expected in zip(fast, slow):
        assert (ours.step, ours.wall_time, ours.file_version, ours.session_status) == (
            expected.step, expected.wall_time, expected.file_version, expected.session_status)
        assert len(ours.values) == len(expected.values)
        assert all(_same_value(a, b) for a, b in zip(ours.values, expected.values))
    plain = sum(1 for e in slow if len(e.values) == 1 and type(e.values[0]) is ScalarValue and e.step)
    # the plain scalars among the histograms were parsed as columns, not one by one
    assert sum(singles) < len(slow) - plain * 0.9


def test_read_columns_holds_every_scalar_in_file_order_and_the_rest_as_events(tensorboard_writer):
    write, path = tensorboard_writer
    _write_mixed_log(write, steps=1200, seed=1)
    slow = _one_by_one(path())
    batch = EventFileReader(path()).read_columns()
    scalars = [v for e in slow for v in e.values if type(v) is ScalarValue]
    assert batch.tags == [v.tag for v in scalars]
    np.testing.assert_array_equal(batch.steps, [v.step for v in scalars])
    np.testing.assert_array_equal(batch.wall_times, [v.wall_time for v in scalars])
    np.testing.assert_array_equal(batch.values, [v.value for v in scalars])
    others = [v for e in slow for v in e.values if type(v) is not ScalarValue]
    ours = [v for e in batch.events for v in e.values]
    assert len(ours) == len(others) and all(_same_value(a, b) for a, b in zip(ours, others))
    assert batch.events[0].file_version == "brain.Event:2"
    assert batch.records == len(slow) and len(batch) == len(scalars)


@pytest.mark.parametrize("max_records", [None, 1000])
def test_read_columns_in_pieces_equals_one_read(tensorboard_writer, max_records):
    write, path = tensorboard_writer
    _write_mixed_log(write, steps=600, seed=2)
    whole = EventFileReader(path()).read_columns()
    reader, tags, values = EventFileReader(path()), [], []
    while (batch := reader.read_columns(max_records)).records:
        tags += batch.tags
        values.append(batch.values)
    assert tags == whole.tags and np.array_equal(np.concatenate(values), whole.values)
    assert reader.read_columns().records == 0


def test_reader_resumes_from_a_saved_offset(tensorboard_writer):
    write, path = tensorboard_writer
    _write_mixed_log(write, steps=300)
    first = EventFileReader(path())
    head = first.read(max_records=1234)
    resumed = EventFileReader(path(), offset=first.offset, corrupt_records=5)
    assert repr(resumed).endswith(f"offset={first.offset}, corrupt_records=5)")
    rest = resumed.read()
    assert len(head) + len(rest) == len(_one_by_one(path())) and rest[0].step == _one_by_one(path())[1234].step
    assert resumed.corrupt_records == 5
    again = EventFileReader(path())
    again.seek(first.offset)
    assert [e.step for e in again.read()] == [e.step for e in rest]
    again.seek(0, corrupt_records=0)
    assert len(again.read()) == len(head) + len(rest) and again.corrupt_records == 0


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_bad_offsets_are_rejected_with_the_value_named(tmp_path, bad):
    with pytest.raises(ValueError, match="offset"):
        EventFileReader(tmp_path / "events.out.tfevents.x", offset=bad)
    reader = EventFileReader(tmp_path / "events.out.tfevents.x")
    with pytest.raises(ValueError, match="corrupt_records"):
        reader.seek(0, corrupt_records=bad)
