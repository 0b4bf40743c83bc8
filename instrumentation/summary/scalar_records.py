"""Scalar events framed without protobuf: one record per ``add``/``add_many``, byte-identical to protobuf's.

An ``add_many`` (one step of ``SummaryWriter.add_scalar_dict``) is one Event whose Summary holds a ``simple_value``
per tag, in order (TensorFlow 1's merged summaries have this form; every TensorBoard reader takes it); an ``add``
is an Event with one value, as torch writes it. Such an Event is a fixed byte layout per (tags, step varint length,
wall time present): only the wall time, the step and the values vary. ``_EventLayout`` keeps that layout as one
``struct`` whose constant pieces are passed as ``s`` arguments, so a record costs one ``pack`` and one CRC call
whatever its number of values (about 1.5 µs for ten; protobuf takes about 10).
"""
from __future__ import annotations

import math
import struct

import numpy as np
from google_crc32c import value as crc32c

from instrumentation.format.record_headers import MASK_DELTA
from instrumentation.format.records import record_header
from instrumentation.summary.builders import ScalarEventBuilder
from instrumentation.summary.scalar_frames import BlockLayout, has_walls, step_lengths
from instrumentation.summary.wire import INT64_MAX, INT64_MIN, varint

_WALL_KEY, _STEP_KEY, _SUMMARY_KEY, _VALUE_KEY, _TAG_KEY, _SIMPLE_VALUE_KEY = 0x09, 0x10, 0x2A, 0x0A, 0x0A, 0x15
_CRC = struct.Struct("<I")
_VARINT_1 = [bytes((step,)) for step in range(128)]
_ORACLE = ScalarEventBuilder()
BLOCK_MIN_ROWS = 24  # fewer rows: one record at a time (the block's dozen NumPy calls cost more below ~20 rows)


def _step_bytes(step: int) -> int:
    """Bytes of the step's varint in the Event: 0 for step 0 (omitted), 10 for a negative step (int64 sign-extended)."""
    if step > 0:
        return (step.bit_length() + 6) // 7
    return 10 if step else 0


def _has_wall(wall_time: float) -> bool:
    """proto3 writes a double unless all its bits are zero (so -0.0 and NaN are written)."""
    return wall_time != 0.0 or math.copysign(1.0, wall_time) < 0.0 or wall_time != wall_time


def _to_float32_range(values: list[float]) -> list[float]:
    """Values beyond float32 as the cast makes them (±inf), as protobuf stores them; struct refuses them."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64).tolist()


class _EventLayout:
    """The framed record of an Event holding one ``simple_value`` per tag, for a step varint length (0: step 0,
    omitted) and wall time present or not."""

    __slots__ = ("step_bytes", "header", "pack", "args", "wall_arg", "step_arg", "first_value_arg", "_pieces",
                 "_block")

    def __init__(self, tags: list[str], step_bytes: int, has_wall: bool) -> None:
        pieces: list[tuple[str, bytes]] = []  # (kind, bytes): constants, and zeros where the wall/step/values go
        entries = []
        for tag in tags:
            name = tag.encode("utf-8")
            value = bytes([_TAG_KEY]) + varint(len(name)) + name + bytes([_SIMPLE_VALUE_KEY]) + bytes(4)
            entries.append(bytes([_VALUE_KEY]) + varint(len(value)) + value)
        if has_wall:
            pieces += [("const", bytes([_WALL_KEY])), ("wall", bytes(8))]
        if step_bytes:
            pieces += [("const", bytes([_STEP_KEY])), ("step", bytes(step_bytes))]
        pieces.append(("const", bytes([_SUMMARY_KEY]) + varint(sum(map(len, entries)))))
        for entry in entries:
            pieces += [("const", entry[:-4]), ("value", bytes(4))]
        merged: list[tuple[str, bytes]] = []  # adjacent constants as one struct field
        for kind, payload in pieces:
            if kind == "const" and merged and merged[-1][0] == "const":
                merged[-1] = ("const", merged[-1][1] + payload)
            else:
                merged.append((kind, payload))
        codes = {"wall": "d", "step": f"{step_bytes}s", "value": "f"}
        self.pack = struct.Struct("<" + "".join(codes.get(kind, f"{len(payload)}s") for kind, payload in merged)).pack
        self.args = [payload if kind == "const" else None for kind, payload in merged]
        kinds = [kind for kind, _ in merged]
        self.wall_arg = kinds.index("wall") if has_wall else -1
        self.step_arg = kinds.index("step") if step_bytes else -1
        self.first_value_arg = kinds.index("value")  # from here on: value, constant, value, ..., value
        self.step_bytes = step_bytes
        self.header = record_header(sum(len(payload) for _, payload in merged))
        self._pieces, self._block = merged, None

    def block(self) -> BlockLayout:
        """This layout for framing many events at once (built on first use)."""
        if self._block is None:
            offsets: dict[str, list[int]] = {"wall": [], "step": [], "value": []}
            offset = 0
            for kind, payload in self._pieces:
                if kind in offsets:
                    offsets[kind].append(offset)
                offset += len(payload)
            self._block = BlockLayout(self.header, b"".join(payload for _, payload in self._pieces),
                                      (offsets["wall"] or [-1])[0], (offsets["step"] or [-1])[0], self.step_bytes,
                                      offsets["value"])
        return self._block

    def record(self, values: list[float], step: int, wall_time: float) -> bytes:
        """One framed record (values beyond float32 become ±inf, as protobuf's float field makes them)."""
        args = self.args  # NOTE: refilled in place: an encoder is used by one thread
        if self.wall_arg >= 0:
            args[self.wall_arg] = wall_time
        if self.step_arg >= 0:
            step_bytes = self.step_bytes
            args[self.step_arg] = (_VARINT_1[step] if step_bytes == 1 else
                                   bytes(((step & 0x7F) | 0x80, step >> 7)) if step_bytes == 2 else varint(step))
        args[self.first_value_arg::2] = values
        try:
            data = self.pack(*args)
        except OverflowError:
            args[self.first_value_arg::2] = _to_float32_range(values)
            data = self.pack(*args)
        crc = crc32c(data)
        return b"".join((self.header, data, _CRC.pack((((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF)))


class ScalarRecordEncoder:
    """Collects scalar events (``add``: one value, ``add_many``: one step's values, ``add_rows``: several steps'
    values of the same tags) and ``take()``s them as framed records, one per event, in the order they were added.
    Keeps the layouts of each list of tags across batches. ``add_rows`` of ``BLOCK_MIN_ROWS`` rows or more, and
    ``add_column`` (one tag's values; consecutive columns of a tag merged) of as many, are framed at once
    (``scalar_frames``); the rest one event at a time at ``take``."""

    def __init__(self) -> None:
        self._layouts: dict[tuple[int, int, bool], _EventLayout] = {}
        self._lists: list[list[str]] = []  # id -> list of tags
        self._ids_of_lists: dict[tuple[str, ...], int] = {}
        self._last_key: tuple[str, ...] | None = None  # the tags of the last event and their list id
        self._last_id = -1
        self._last_tuple: tuple[str, ...] | None = None  # the tuple object they were passed as, if any
        self._clear()

    def _clear(self) -> None:
        self._list_ids: list[int] = []
        self._values: list[float] = []
        self._steps: list[int] = []
        self._walls: list[float] = []
        self._counts: list[int] = []
        self._framed: list[bytes] = []  # framed records of the events added before those in the lists above
        self._framed_events = 0
        self._column: tuple[str, list[float], list[int], list[float]] | None = None  # add_column's, after the lists

    def __len__(self) -> int:
        """Records (events) waiting."""
        return len(self._steps) + self._framed_events + (0 if self._column is None else len(self._column[2]))

    @staticmethod
    def one(tag: str, value: float, step: int, wall_time: float) -> bytes:
        """One serialized Event, built by protobuf (the oracle the encoder matches)."""
        return _ORACLE(tag, value, step, wall_time)

    @staticmethod
    def many(tags: list[str], values: list[float], step: int, wall_time: float) -> bytes:
        """One serialized Event of several values, built by protobuf."""
        return _ORACLE.many(tags, values, step, wall_time)

    def discard(self) -> None:
        """Forget what was added (after a failed ``take``)."""
        self._clear()

    def add(self, tag: str, value: float, step: int, wall_time: float) -> None:
        self.add_many([tag], [value], step, wall_time)

    def _list_id(self, tags: list[str] | tuple[str, ...]) -> int:
        if tags is not self._last_tuple:  # NOTE: a tuple passed again (add_scalar_rows) needs no comparison
            key = tags if tags.__class__ is tuple else tuple(tags)
            if key != self._last_key:
                known = self._ids_of_lists.get(key)
                if known is None:
                    known = self._ids_of_lists[key] = len(self._lists)
                    self._lists.append(list(tags))
                self._last_id, self._last_key = known, key
            self._last_tuple = tags if tags.__class__ is tuple else None
        return self._last_id

    def add_many(self, tags: list[str], values: list[float], step: int, wall_time: float) -> None:
        """One Event of ``tags`` and ``values`` (aligned, at least one) at one step and wall time."""
        if self._column is not None:
            self._end_column()
        self._list_ids.append(self._list_id(tags))
        self._values += values
        self._steps.append(step)
        self._walls.append(wall_time)
        self._counts.append(len(values))

    def add_rows(self, tags: tuple[str, ...], rows: list[list[float]], steps: list[int], walls: list[float]) -> None:
        """One ``add_many`` per row (rows of ``len(tags)`` values)."""
        if self._column is not None:
            self._end_column()
        if len(steps) >= BLOCK_MIN_ROWS and self._add_block(tags, rows, steps, walls):
            return
        add_many = self.add_many
        for row, step, wall_time in zip(rows, steps, walls):
            add_many(tags, row, step, wall_time)

    def add_column(self, tag: str, values: list[float], steps: list[int], walls: list[float]) -> None:
        """One ``add`` per value. Columns of one tag added one after the other are framed as one block."""
        column = self._column
        if column is not None and column[0] == tag:
            column[1].extend(values)
            column[2].extend(steps)
            column[3].extend(walls)
            return
        if column is not None:
            self._end_column()
        self._column = (tag, [*values], [*steps], [*walls])

    def _end_column(self) -> None:
        """Frame the column being collected, or add its values one by one when it is short."""
        (tag, values, steps, walls), self._column = self._column, None  # type: ignore[misc]
        tags = (tag,)
        if len(steps) >= BLOCK_MIN_ROWS and self._add_block(tags, values, steps, walls):
            return
        for value, step, wall_time in zip(values, steps, walls):
            self.add_many(tags, [value], step, wall_time)

    def _add_block(self, tags: tuple[str, ...], rows: list, steps: list[int], walls: list[float]) -> bool:
        """Frame the rows (or one tag's values) at once; False for a step beyond int64 (left to the one-by-one
        path, which drops that event as protobuf would)."""
        try:
            step_array = np.asarray(steps, dtype=np.int64)
        except OverflowError:
            return False
        values = np.asarray(rows, dtype="<f8").reshape(len(steps), len(tags))
        wall_array = np.asarray(walls, dtype="<f8")
        list_id = self._list_id(tags)
        if self._steps:  # NOTE: what came before is framed first: the file keeps the order events were added in
            self._framed_events += len(self._steps)
            self._framed.append(self._take_lists())
        first, last = int(step_array[0]), int(step_array[-1])
        if 0 < first <= last and _step_bytes(first) == _step_bytes(last) and wall_array.all() and \
                (step_array[1:] >= step_array[:-1]).all():  # NOTE: the common block: rising steps, one layout
            runs = [(0, len(steps), _step_bytes(first), True)]
        else:
            lengths, walled = step_lengths(step_array), has_walls(wall_array)
            keys = lengths * 2 + walled
            cuts = (np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()  # runs of one layout, in order
            runs = [(start, stop, int(lengths[start]), bool(walled[start]))
                    for start, stop in zip([0, *cuts], [*cuts, len(steps)])]
        layouts = self._layouts
        for start, stop, step_bytes, walled_run in runs:
            key = (list_id, step_bytes, walled_run)
            layout = layouts.get(key) or self._layout(key)
            self._framed.append(layout.block().frame(values[start:stop], step_array[start:stop],
                                                     wall_array[start:stop] if walled_run else None))
        self._framed_events += len(steps)
        return True

    def take(self) -> bytes:
        """The framed records of everything added since the last ``take``, in the order they were added."""
        if self._column is not None:
            self._end_column()
        framed = self._framed
        if self._steps:
            framed.append(self._take_lists())
        self._clear()
        if len(self._lists) > 4096:  # a program inventing tag lists: start over rather than grow
            self.__init__()
        return b"".join(framed)

    def _take_lists(self) -> bytes:
        """The framed records of the events in the lists (one ``record`` each), which are emptied."""
        list_ids, values, steps, walls, counts = self._list_ids, self._values, self._steps, self._walls, self._counts
        self._list_ids, self._values, self._steps, self._walls, self._counts = [], [], [], [], []
        layouts, records, start = self._layouts, [], 0
        for list_id, step, wall_time, count in zip(list_ids, steps, walls, counts):
            stop = start + count
            if INT64_MIN <= step <= INT64_MAX:  # protobuf refuses other steps: that event is lost, as with protobuf
                key = (list_id, _step_bytes(step), _has_wall(wall_time))
                layout = layouts.get(key) or self._layout(key)
                records.append(layout.record(values[start:stop], step, wall_time))
            start = stop
        return b"".join(records)

    def _layout(self, key: tuple[int, int, bool]) -> _EventLayout:
        layout = self._layouts[key] = _EventLayout(self._lists[key[0]], key[1], key[2])
        return layout
