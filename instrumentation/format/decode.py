"""Event protos -> frozen value objects, for every scalar/histogram/text form that TensorBoard-family writers use."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from instrumentation.format import metadata, protos
from instrumentation.format.columns import Columns, plain_scalar_mask, runs_of, scalar_columns
from instrumentation.format.plain_scalars import TaggedColumns, plain_scalars, plain_scalars_at
from instrumentation.format.histogram import buckets_from_histo, buckets_from_tensor, moments_from_buckets
from instrumentation.format.tensors import tensor_to_numpy
from instrumentation.format.values import Event, HistogramValue, PluginValue, ScalarValue, SummaryValue, TextValue

_SESSION_STATUS = {1: "START", 2: "STOP", 3: "CHECKPOINT"}


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The slot setters of a frozen dataclass, checked against its field list so a new field is never missed."""
    if tuple(f.name for f in fields(cls)) != names:
        raise RuntimeError(f"{cls.__name__} fields changed: update instrumentation/format/decode.py")
    return tuple(cls.__dict__[name].__set__ for name in names)


# NOTE: the reader builds one ScalarValue and one Event per record; setting the slots directly costs about half
# of the frozen dataclass __init__ (which goes through object.__setattr__ once per field).
_new = object.__new__
_sv_tag, _sv_step, _sv_wall, _sv_value = _slot_setters(ScalarValue, ("tag", "step", "wall_time", "value"))
_ev_step, _ev_wall, _ev_values, _ev_version, _ev_session = _slot_setters(
    Event, ("step", "wall_time", "values", "file_version", "session_status"))


def _scalar(tag: str, step: int, wall_time: float, value: float) -> ScalarValue:
    scalar = _new(ScalarValue)
    _sv_tag(scalar, tag), _sv_step(scalar, step), _sv_wall(scalar, wall_time), _sv_value(scalar, value)
    return scalar


def _event(step: int, wall_time: float, values: tuple, file_version: str | None = None,
           session_status: str | None = None) -> Event:
    event = _new(Event)
    _ev_step(event, step), _ev_wall(event, wall_time), _ev_values(event, values)
    _ev_version(event, file_version), _ev_session(event, session_status)
    return event


def _histogram(tag: str, step: int, wall_time: float, histo: Any) -> HistogramValue:
    if len(histo.bucket_limit) != len(histo.bucket):
        raise ValueError(f"histogram {tag!r}: {len(histo.bucket_limit)} bucket limits for {len(histo.bucket)} counts")
    buckets = buckets_from_histo(np.asarray(histo.bucket_limit), np.asarray(histo.bucket), histo.min, histo.max)
    return HistogramValue(tag, step, wall_time, histo.min, histo.max, histo.num, histo.sum, histo.sum_squares,
                          buckets.edges, buckets.counts)


def _tensor_value(tag: str, step: int, wall_time: float, plugin: str, content: bytes, tensor: Any) -> SummaryValue:
    array = tensor_to_numpy(tensor)
    if plugin == metadata.SCALARS_PLUGIN and array.size == 1:
        return _scalar(tag, step, wall_time, float(array.reshape(())))
    if plugin == metadata.HISTOGRAMS_PLUGIN and array.ndim == 2 and array.shape[1] == 3:
        buckets = buckets_from_tensor(array)
        moments = moments_from_buckets(buckets)
        return HistogramValue(tag, step, wall_time, moments.minimum, moments.maximum, moments.num, moments.sum,
                              moments.sum_squares, buckets.edges, buckets.counts)
    if plugin == metadata.TEXT_PLUGIN and array.dtype == object:
        return TextValue(tag, step, wall_time, "\n".join(item.decode("utf-8", "replace") for item in array.flat))
    return PluginValue(tag, step, wall_time, plugin, content, array)


def _image(tag: str, step: int, wall_time: float, image: Any) -> PluginValue:
    """A TF1 `image` value (what torch and tensorboardX write) as the images plugin's tensor: [width, height, PNG]."""
    tensor = np.empty(3, dtype=object)
    tensor[:] = [str(image.width).encode(), str(image.height).encode(), image.encoded_image_string]
    return PluginValue(tag, step, wall_time, metadata.IMAGES_PLUGIN, b"", tensor)


def decode_value(value: Any, step: int, wall_time: float) -> SummaryValue | None:
    """One Summary.Value; None for a value that holds nothing (no data, no plugin metadata)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return _scalar(value.tag, step, wall_time, value.simple_value)
    plugin_data = value.metadata.plugin_data
    if kind == "image":
        return _image(value.tag, step, wall_time, value.image)
    if kind == "audio":
        return PluginValue(value.tag, step, wall_time, metadata.AUDIO_PLUGIN, value.audio.content_type.encode())
    if kind == "histo":
        return _histogram(value.tag, step, wall_time, value.histo)
    if kind == "tensor":
        try:
            return _tensor_value(value.tag, step, wall_time, plugin_data.plugin_name, plugin_data.content, value.tensor)
        except ValueError:  # a dtype outside TensorProto's numeric/string set: keep it raw
            return PluginValue(value.tag, step, wall_time, plugin_data.plugin_name, plugin_data.content)
    if plugin_data.plugin_name:
        return PluginValue(value.tag, step, wall_time, plugin_data.plugin_name, plugin_data.content)
    return None


def decode_event(proto: Any) -> Event:
    """One parsed Event proto -> Event (summary values in file order; file_version / session_log kept)."""
    which = proto.WhichOneof("what")
    step, wall_time = proto.step, proto.wall_time
    if which == "summary":
        summary_values = proto.summary.value
        if len(summary_values) == 1:  # the common case, kept free of generator overhead
            value = summary_values[0]
            if value.WhichOneof("value") == "simple_value":
                return _event(step, wall_time, (_scalar(value.tag, step, wall_time, value.simple_value),))
            decoded = decode_value(value, step, wall_time)
            return _event(step, wall_time, () if decoded is None else (decoded,))
        decoded_values = [decode_value(value, step, wall_time) for value in summary_values]
        return _event(step, wall_time, tuple(value for value in decoded_values if value is not None))
    if which == "file_version":
        return _event(step, wall_time, (), proto.file_version)
    if which == "session_log":
        return _event(step, wall_time, (), None, _SESSION_STATUS.get(proto.session_log.status))
    if which in ("graph_def", "meta_graph_def"):  # torch's add_graph; the graph plugin's run-level data
        tag = metadata.GRAPH_TAG if which == "graph_def" else metadata.META_GRAPH_TAG
        return _event(step, wall_time, (PluginValue(tag, step, wall_time, metadata.GRAPHS_PLUGIN,
                                                    getattr(proto, which)),))
    if which == "tagged_run_metadata":
        tagged = proto.tagged_run_metadata
        return _event(step, wall_time, (PluginValue(metadata.RUN_METADATA_TAG_PREFIX + tagged.tag, step, wall_time,
                                                    metadata.GRAPHS_PLUGIN, tagged.run_metadata),))
    return _event(step, wall_time, ())


parse_event = protos.Event.FromString


def _scalar_event(tag: str, step: int, wall_time: float, value: float, new: Any = _new, scalar_cls: type = ScalarValue,
                  event_cls: type = Event, sv_tag: Any = _sv_tag, sv_step: Any = _sv_step, sv_wall: Any = _sv_wall,
                  sv_value: Any = _sv_value, ev_step: Any = _ev_step, ev_wall: Any = _ev_wall,
                  ev_values: Any = _ev_values, ev_version: Any = _ev_version, ev_session: Any = _ev_session) -> Event:
    """Event(step, wall_time, (ScalarValue(...),)) for the columnar path (defaults bind globals as fast locals)."""
    scalar = new(scalar_cls)
    sv_tag(scalar, tag), sv_step(scalar, step), sv_wall(scalar, wall_time), sv_value(scalar, value)
    event = new(event_cls)
    ev_step(event, step), ev_wall(event, wall_time), ev_values(event, (scalar,))
    ev_version(event, None), ev_session(event, None)
    return event


def _scalar_events(columns: TaggedColumns) -> list[Event]:
    """The Events of columnar scalars: one per record, holding that record's values."""
    tags, steps, wall_times, values = columns.tags, columns.steps.tolist(), columns.wall_times.tolist(), \
        columns.values.tolist()
    if columns.per_event is None:
        return list(map(_scalar_event, tags, steps, wall_times, values))
    events, start = [], 0
    for count in columns.per_event.tolist():
        stop = start + count
        scalars = tuple(map(_scalar, tags[start:stop], steps[start:stop], wall_times[start:stop], values[start:stop]))
        events.append(_event(steps[start], wall_times[start], scalars))
        start = stop
    return events


_BATCH_RECORDS = 4096
_MIN_COLUMN_RECORDS = 16
_MIN_SEGMENT_RECORDS = 4  # a shorter run of plain scalars inside a mixed batch is decoded one by one

class RecordDecoder:
    """Decodes record payloads into Events in file order; `failures` counts payloads that are not Events."""

    def __init__(self) -> None:
        self.failures = 0

    def decode(self, records: Sequence[bytes],
               located: tuple[bytes, np.ndarray, np.ndarray] | None = None) -> list[Event]:
        events: list[Event] = []
        extend = events.extend
        self.decode_into(records, lambda columns: extend(_scalar_events(columns)), events.append, located)
        return events

    def decode_into(self, records: Sequence[bytes], columnar: Callable[[TaggedColumns], object],
                    single: Callable[[Event], object],
                    located: tuple[bytes, np.ndarray, np.ndarray] | None = None) -> None:
        """Hands every record over in file order: runs of scalar records as `TaggedColumns` to `columnar`, every
        other record as a decoded Event to `single`.

        Plain scalar events (one `simple_value`, the common case) are decoded all at once with numpy
        (`plain_scalars`); the runs of other records go through protobuf: a batch of `_BATCH_RECORDS` is first
        parsed columnar whole (several values per event, as `add_scalar_rows` writes); if that fails
        (histograms, text, step 0 or the file_version record among them) it is split at the records that are not
        scalars (`plain_scalar_mask`), each run of scalars is parsed columnar and the others one by one.
        `located`: (buffer, starts, lengths) where the records lie in the scanned chunk (`RecordScan`), so the
        plain ones are decoded in place.
        """
        if not records:
            return
        mask, plain = plain_scalars(records) if located is None else plain_scalars_at(*located)
        if mask.all():
            columnar(plain)
            return
        first_point = np.cumsum(mask) - mask  # each plain record's row in `plain`
        for lo, hi, is_plain in runs_of(mask):
            if is_plain:
                columnar(plain.rows(int(first_point[lo]), int(first_point[lo]) + hi - lo))
            else:
                self._decode_others(records[lo:hi], columnar, single)

    def _decode_others(self, records: list[bytes], columnar: Callable[[TaggedColumns], object],
                       single: Callable[[Event], object]) -> None:
        def tagged(columns: Columns) -> None:
            columnar(TaggedColumns.from_lists(*columns))

        for start in range(0, len(records), _BATCH_RECORDS):
            batch = records[start:start + _BATCH_RECORDS]
            columns = scalar_columns(batch) if len(batch) >= _MIN_COLUMN_RECORDS else None
            if columns is not None:
                tagged(columns)
                continue
            if len(batch) < _MIN_COLUMN_RECORDS:
                self._one_by_one(batch, single)
                continue
            for lo, hi, plain in runs_of(plain_scalar_mask(batch)):
                if plain and hi - lo >= _MIN_SEGMENT_RECORDS:
                    self._decode_run(batch[lo:hi], tagged, single, columns_failed=False)
                else:
                    self._one_by_one(batch[lo:hi], single)

    def _decode_run(self, records: list[bytes], columnar: Callable[[Columns], object],
                    single: Callable[[Event], object], columns_failed: bool) -> None:
        columns = None if columns_failed else scalar_columns(records)
        if columns is not None:
            columnar(columns)
            return
        half = len(records) // 2
        if half >= _MIN_COLUMN_RECORDS:
            # Bisect while one half is plain scalars; when both halves fail, decode one by one instead of
            # re-parsing ever smaller parts.
            left, right = records[:half], records[half:]
            left_columns, right_columns = scalar_columns(left), scalar_columns(right)
            if left_columns is not None or right_columns is not None:
                for part, part_columns in ((left, left_columns), (right, right_columns)):
                    if part_columns is not None:
                        columnar(part_columns)
                    else:
                        self._decode_run(part, columnar, single, columns_failed=True)
                return
        self._one_by_one(records, single)

    def _one_by_one(self, records: list[bytes], single: Callable[[Event], object]) -> None:
        for data in records:
            try:
                event = decode_event(parse_event(data))
            except Exception:  # NOTE: intact framing around bytes we cannot use, whatever the error: counted
                self.failures += 1
                continue
            single(event)
