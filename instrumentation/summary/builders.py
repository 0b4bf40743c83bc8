"""Pure record builders: summary data in, one serialized Event (bytes) out. No I/O, no threads."""
from __future__ import annotations

from typing import Any

import numpy as np

from instrumentation.format import metadata, protos
from instrumentation.format.tensors import string_tensor
from instrumentation.summary.bucketing import HistogramData
from instrumentation.summary.wire import (INT64_MAX, INT64_MIN, double_field, int64_field, length_delimited,
                                          packed_doubles)

Event, Summary, SummaryMetadata, SessionLog = protos.Event, protos.Summary, protos.SummaryMetadata, protos.SessionLog


def file_version_event(wall_time: float, step: int = 0) -> bytes:
    return Event(wall_time=wall_time, step=step, file_version=metadata.FILE_VERSION).SerializeToString()


def session_start_event(wall_time: float, step: int) -> bytes:
    """SessionLog START: TensorBoard then hides earlier events with a step >= `step` (torch's purge_step)."""
    return Event(wall_time=wall_time, step=step, session_log=SessionLog(status=SessionLog.START)).SerializeToString()


def value_event(summary_value: Any, step: int, wall_time: float) -> bytes:
    """One Event holding one Summary.Value."""
    return Event(wall_time=wall_time, step=step, summary=Summary(value=[summary_value])).SerializeToString()


def histogram_event(tag: str, histogram: HistogramData, step: int, wall_time: float) -> bytes:
    """A TF1-style `histo` value (what torch and tensorboardX write): right edges, exact min/max/sum. Encoded by
    hand (byte-identical to protobuf's serialization, which costs ~0.2 µs per bucket building Python lists)."""
    if not INT64_MIN <= step <= INT64_MAX:
        return _histogram_event_by_protobuf(tag, histogram, step, wall_time)  # raises as protobuf does
    histo = b"".join((double_field(0x09, histogram.minimum), double_field(0x11, histogram.maximum),
                      double_field(0x19, histogram.num), double_field(0x21, histogram.sum),
                      double_field(0x29, histogram.sum_squares), packed_doubles(0x32, histogram.edges[1:]),
                      packed_doubles(0x3A, histogram.counts)))
    value = length_delimited(0x0A, tag.encode("utf-8")) + length_delimited(0x2A, histo)
    return double_field(0x09, wall_time) + int64_field(0x10, step) + length_delimited(
        0x2A, length_delimited(0x0A, value))


def _histogram_event_by_protobuf(tag: str, histogram: HistogramData, step: int, wall_time: float) -> bytes:
    histo = protos.HistogramProto(
        min=histogram.minimum, max=histogram.maximum, num=histogram.num, sum=histogram.sum,
        sum_squares=histogram.sum_squares, bucket_limit=np.asarray(histogram.edges[1:], dtype=np.float64).tolist(),
        bucket=np.asarray(histogram.counts, dtype=np.float64).tolist())
    return value_event(Summary.Value(tag=tag, histo=histo), step, wall_time)


def text_event(tag: str, text: str, step: int, wall_time: float) -> bytes:
    """A string tensor with plugin `text`, under `<tag>/text_summary` as torch and tensorboardX name it."""
    plugin = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=metadata.TEXT_PLUGIN))
    value = Summary.Value(tag=tag + metadata.TEXT_TAG_SUFFIX, metadata=plugin, tensor=string_tensor([text]))
    return value_event(value, step, wall_time)


def plugin_event(tag: str, plugin_name: str, content: bytes, step: int, wall_time: float) -> bytes:
    """A value with only plugin metadata (the hparams plugin's form)."""
    plugin = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin_name, content=content))
    return value_event(Summary.Value(tag=tag, metadata=plugin), step, wall_time)
