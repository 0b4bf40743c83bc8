"""The reader decodes every form other writers produce; files written by TensorBoard's own writer and summary ops."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, histogram_pb2, summary_pb2
from tensorboard.plugins.histogram.summary_v2 import histogram_pb
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.util import tensor_util

from instrumentation.format import EventFileReader, HistogramValue, PluginValue, ScalarValue, TextValue
from instrumentation.format import is_event_file
from instrumentation.format.decode import decode_event, parse_event


def _event(summary, step=3, wall_time=10.5):
    return event_pb2.Event(step=step, wall_time=wall_time, summary=summary)


def _read_one(tensorboard_writer, summary):
    write, path = tensorboard_writer
    write(_event(summary))
    events = EventFileReader(path()).read()
    assert events[0].file_version == "brain.Event:2"
    (value,) = events[1].values
    assert (value.step, value.wall_time) == (3, 10.5)
    return value


def test_simple_value_scalar(tensorboard_writer):
    value = _read_one(tensorboard_writer, summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="a",
                                                                                              simple_value=0.25)]))
    assert value == ScalarValue("a", 3, 10.5, 0.25)


@pytest.mark.parametrize("number", [1.5, float("nan"), float("inf"), -7.0])
def test_tf2_scalar_tensor(tensorboard_writer, number):
    value = _read_one(tensorboard_writer, scalar_pb("loss", number))
    assert isinstance(value, ScalarValue) and value.tag == "loss"
    np.testing.assert_equal(value.value, np.float32(number))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.float16, np.uint8, np.bool_])
def test_scalar_tensors_of_every_dtype(tensorboard_writer, dtype):
    summary = scalar_pb("x", 1.0)
    summary.value[0].tensor.CopyFrom(tensor_util.make_tensor_proto(np.array(1, dtype=dtype)))
    assert _read_one(tensorboard_writer, summary).value == 1.0


def test_tf1_histo_uses_min_and_max_as_outer_edges(tensorboard_writer):
    histo = histogram_pb2.HistogramProto(min=-0.5, max=2.5, num=6, sum=6.0, sum_squares=11.0,
                                         bucket_limit=[0.0, 1.0, 1.7976931348623157e308], bucket=[1, 2, 3])
    value = _read_one(tensorboard_writer, summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="h", histo=histo)]))
    assert isinstance(value, HistogramValue)
    np.testing.assert_array_equal(value.edges, [-0.5, 0.0, 1.0, 2.5])
    np.testing.assert_array_equal(value.counts, [1, 2, 3])
    assert (value.min, value.max, value.num, value.sum, value.sum_squares) == (-0.5, 2.5, 6, 6.0, 11.0)


def test_tf2_histogram_tensor(tensorboard_writer):
    data = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 4.0])
    value = _read_one(tensorboard_writer, histogram_pb("w", data, buckets=4))
    rows = tensor_util.make_ndarray(histogram_pb("w", data, buckets=4).value[0].tensor)
    assert isinstance(value, HistogramValue)
    np.testing.assert_allclose(value.edges, np.concatenate([rows[:1, 0], rows[:, 1]]))
    np.testing.assert_array_equal(value.counts, rows[:, 2])
    assert value.num == 6 and value.min == 0.0 and value.max == 4.0


def test_text_tensor(tensorboard_writer):
    value = _read_one(tensorboard_writer, text_pb("notes", "héllo **markdown**"))
    assert value == TextValue("notes", 3, 10.5, "héllo **markdown**")


def test_other_plugins_are_kept_raw(tensorboard_writer):
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="_hparams_/experiment")])
    summary.value[0].metadata.plugin_data.plugin_name = "hparams"
    summary.value[0].metadata.plugin_data.content = b"\x01\x02"
    value = _read_one(tensorboard_writer, summary)
    assert isinstance(value, PluginValue) and (value.plugin_name, value.content) == ("hparams", b"\x01\x02")


def test_session_log_start_is_reported():
    event = event_pb2.Event(step=40, wall_time=1.0, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
    decoded = decode_event(parse_event(event.SerializeToString()))
    assert (decoded.step, decoded.session_status, decoded.values) == (40, "START", ())


def test_columnar_batches_decode_like_one_by_one(tensorboard_writer):
    """Mixed content (step 0, several values per event, histograms, text) must come out in file order."""
    write, path = tensorboard_writer
    rng = np.random.default_rng(0)
    for step in range(3000):
        if step % 997 == 5:
            write(_event(histogram_pb("h", rng.normal(size=50)), step=step))
        elif step % 500 == 7:
            write(_event(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="a", simple_value=1.0),
                                                    summary_pb2.Summary.Value(tag="b", simple_value=2.0)]), step))
        else:
            write(_event(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", simple_value=step / 7)]),
                         step=step, wall_time=0.0 if step == 100 else 1.0 + step))
    reader = EventFileReader(path())
    fast = reader.read()
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    slow = [decode_event(parse_event(proto.SerializeToString())) for proto in LegacyEventFileLoader(path()).Load()]
    assert len(fast) == len(slow) == 3001
    for ours, expected in zip(fast, slow):
        assert (ours.step, ours.wall_time, ours.file_version) == (expected.step, expected.wall_time,
                                                                   expected.file_version)
        assert [(type(v), v.tag) for v in ours.values] == [(type(v), v.tag) for v in expected.values]
    assert [v.value for e in fast for v in e.values if v.tag == "loss"] == \
        [float(np.float32(step / 7)) for step in range(3000) if step % 997 != 5 and step % 500 != 7]


def test_undecodable_record_with_intact_framing_is_counted(tmp_path):
    from instrumentation.format import frame_records

    good = event_pb2.Event(step=1, wall_time=1.0).SerializeToString()
    path = tmp_path / "events.out.tfevents.x"
    path.write_bytes(frame_records([good, b"\xff\xff\xff", good]))
    reader = EventFileReader(path)
    assert [event.step for event in reader.read()] == [1, 1] and reader.corrupt_records == 1


def test_is_event_file():
    assert is_event_file("events.out.tfevents.1700000000.host.1.0")
    assert is_event_file("/logs/run/events.out.tfevents.1.h.2.3.v2")
    assert not is_event_file("run/events.out.tfevents")
    assert not is_event_file("backup.events.out.tfevents.1.h.2.3")
