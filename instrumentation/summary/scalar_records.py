"""Many scalar events framed at once: NumPy builds the records and their CRCs, a run of steps as one array.

Each record is byte-identical to serializing its Event with protobuf and framing it (``records.frame_record``).
An Event holding one ``simple_value`` is a fixed byte layout per (tag, step varint length, wall time present):
only the wall time, the step and the value vary. CRC-32C is affine in the data, so a record's CRC is the CRC of
its layout with those bytes zeroed, XOR the contribution of each variable byte, which depends only on the byte and
its distance from the end of the record (``_contributions``). Steps that log the same list of tags (the usual
case: one ``add_scalar_dict`` per step, or the same ``add_scalar`` every step) are built as one array, a row per
step, whatever else is logged in between; anything else is built record by record with protobuf. Records keep the
order they were added in.
"""
from __future__ import annotations


import numpy as np
from google_crc32c import value as crc32c

from instrumentation.format.records import frame_records, masked_crc32c_array, record_header
from instrumentation.summary.builders import ScalarEventBuilder
from instrumentation.summary.wire import varint

_BUILDER = ScalarEventBuilder()
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_WALL_KEY, _STEP_KEY, _SUMMARY_KEY, _VALUE_KEY, _TAG_KEY, _SIMPLE_VALUE_KEY = 0x09, 0x10, 0x2A, 0x0A, 0x0A, 0x15
_VARINT_BOUNDS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)  # a varint needs 1 + #(>= bound)


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_contribution_table = _TABLE[None, :]


def _contributions(max_distance: int) -> np.ndarray:
    """(> max_distance, 256): row d is what byte b, followed by d more bytes, XORs into a record's CRC."""
    global _contribution_table
    if len(_contribution_table) <= max_distance:
        rows, wanted = list(_contribution_table), max(max_distance + 1, 2 * len(_contribution_table))
        while len(rows) < wanted:
            rows.append(_TABLE[rows[-1] & 0xFF] ^ (rows[-1] >> 8))
        _contribution_table = np.stack(rows)
    return _contribution_table


def _varint_length(steps: np.ndarray) -> np.ndarray:
    """Bytes of each step's varint (steps as uint64: negative int64 steps take 10, as protobuf writes them)."""
    return 1 + (steps[:, None] >= _VARINT_BOUNDS[None, :]).sum(axis=1)


class _Layout:
    """One tag's record layout for a step varint length (0: step 0, omitted) and wall time present or not."""

    __slots__ = ("template", "wall_at", "step_at", "step_bytes", "value_at", "variable", "base_crc", "table")

    def __init__(self, tag: str, step_bytes: int, has_wall: bool) -> None:
        name = tag.encode("utf-8")
        value = bytes([_TAG_KEY]) + varint(len(name)) + name + bytes([_SIMPLE_VALUE_KEY]) + bytes(4)
        summary = bytes([_VALUE_KEY]) + varint(len(value)) + value
        data = bytearray()
        self.wall_at = self.step_at = -1
        if has_wall:
            data.append(_WALL_KEY)
            self.wall_at = len(data)
            data += bytes(8)
        if step_bytes:
            data.append(_STEP_KEY)
            self.step_at = len(data)
            data += bytes(step_bytes)
        data += bytes([_SUMMARY_KEY]) + varint(len(summary)) + summary
        self.step_bytes = step_bytes
        self.value_at = len(data) - 4
        # offsets below are into the framed record: 12 header bytes, the data, 4 CRC bytes
        self.template = np.frombuffer(record_header(len(data)) + bytes(data) + bytes(4), dtype=np.uint8)
        variable = ([self.wall_at + k for k in range(8)] if has_wall else []) + \
                   [self.step_at + k for k in range(step_bytes)] + [self.value_at + k for k in range(4)]
        self.variable = np.array(variable, dtype=np.intp) + 12
        distances = len(data) - 1 - (self.variable - 12)
        self.base_crc = np.uint32(crc32c(bytes(data)))
        # 256 entries per variable byte: the CRC contribution of each value it can take
        self.table = _contributions(int(distances.max()))[distances].ravel()


class ScalarRecordEncoder:
    """Collects scalar events (``add``, ``add_many``) and ``take()``s them as framed records.

    Keeps each tag's id and layouts across batches; a step that logs the same tags as the one before (the usual
    case) reuses its tag ids, so collecting costs a few list operations per step, not per value.
    """

    MIN_BATCH = 64  # below this many events the per-record protobuf path is as fast

    def __init__(self) -> None:
        self._layouts: dict[tuple[int, int, bool], _Layout] = {}
        self._run_layouts: dict[tuple[bytes, int, bool], _RunLayout] = {}
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._fallback = ScalarEventBuilder()
        self._last_tags: list[str] | None = None
        self._last_ids: np.ndarray | None = None
        self._ids_of_lists: dict[tuple[str, ...], np.ndarray] = {}  # one ids array per distinct list of tags
        self._clear()

    def _clear(self) -> None:
        self._id_chunks: list[np.ndarray] = []
        self._values: list[float] = []
        self._steps: list[int] = []
        self._walls: list[float] = []
        self._counts: list[int] = []

    def __len__(self) -> int:
        return len(self._values)

    @staticmethod
    def one(tag: str, value: float, step: int, wall_time: float) -> bytes:
        """One serialized Event, built by protobuf (the oracle the bulk path matches)."""
        return _BUILDER(tag, value, step, wall_time)

    def discard(self) -> None:
        """Forget what was added (after a failed ``take``)."""
        self._clear()

    def add(self, tag: str, value: float, step: int, wall_time: float) -> None:
        self.add_many([tag], [value], step, wall_time)

    def add_many(self, tags: list[str], values: list[float], step: int, wall_time: float) -> None:
        """Events of one step and wall time; ``tags`` and ``values`` are aligned."""
        if tags != self._last_tags:
            key = tuple(tags)
            known = self._ids_of_lists.get(key)
            if known is None:
                if len(self._ids_of_lists) >= 1024:
                    self._ids_of_lists.clear()
                ids = self._ids
                known = self._ids_of_lists[key] = np.fromiter(
                    (ids[tag] if tag in ids else self._new_id(tag) for tag in tags), dtype=np.intp, count=len(tags))
            self._last_ids, self._last_tags = known, list(tags)
        self._id_chunks.append(self._last_ids)
        self._values.extend(values)
        self._steps.append(step)
        self._walls.append(wall_time)
        self._counts.append(len(tags))

    def _new_id(self, tag: str) -> int:
        self._ids[tag] = len(self._names)
        self._names.append(tag)
        return self._ids[tag]

    def take(self) -> bytes:
        """The framed records of everything added since the last ``take``, in the order they were added."""
        if not self._values:
            return b""
        chunks, values, steps, walls, counts = self._id_chunks, self._values, self._steps, self._walls, self._counts
        self._clear()
        try:
            step_column = np.asarray(steps, dtype=np.int64)
        except OverflowError:  # a step beyond int64: protobuf refuses it, record by record
            return frame_records(self._items_one_by_one(chunks, values, steps, walls, counts, 0, len(steps), 0))
        with np.errstate(over="ignore"):
            value_bytes = np.asarray(values, dtype=np.float64).astype("<f4").view(np.uint8).reshape(-1, 4)
        wall_column = np.asarray(walls, dtype="<f8")
        wall_bytes = wall_column.view(np.uint8).reshape(-1, 8)
        unsigned_steps = step_column.view(np.uint64)
        step_lengths = np.where(step_column == 0, 0, _varint_length(unsigned_steps)).tolist()
        has_wall = (wall_column.view(np.uint64) != 0).tolist()
        starts = np.cumsum([0] + counts[:-1]).tolist()
        groups: dict[tuple[int, int, bool], list[int]] = {}  # steps logging the same tags with the same layouts
        for item, ids in enumerate(chunks):
            key = (id(ids), step_lengths[item], has_wall[item])
            group = groups.get(key)
            if group is None:
                groups[key] = [item]
            else:
                group.append(item)
        parts: list[bytes | memoryview | None] = [None] * len(chunks)
        for items in groups.values():
            ids = chunks[items[0]]
            if len(items) * len(ids) < self.MIN_BATCH or len(set(ids.tolist())) != len(ids):
                for item in items:
                    parts[item] = frame_records(self._items_one_by_one(chunks, values, steps, walls, counts, item,
                                                                       item + 1, starts[item]))
                continue
            rows = np.asarray(items, dtype=np.intp)
            value_rows = value_bytes[np.asarray([starts[i] for i in items], dtype=np.intp)[:, None]
                                     + np.arange(len(ids))].reshape(len(items), -1)
            layout = self._run_layout(ids, step_lengths[items[0]], has_wall[items[0]])
            block = memoryview(layout.encode(wall_bytes[rows], unsigned_steps[rows], value_rows))
            width = layout.template.size
            for row, item in enumerate(items):  # back into the order the steps were added in
                parts[item] = block[row * width:(row + 1) * width]
        return b"".join(parts)  # type: ignore[arg-type]

    def _items_one_by_one(self, chunks: list[np.ndarray], values: list[float], steps: list[int], walls: list[float],
                          counts: list[int], first: int, stop: int, first_value: int) -> list[bytes]:
        names, build, records, position = self._names, self._fallback, [], first_value
        for item in range(first, stop):
            step, wall_time = steps[item], walls[item]
            for tag_id in chunks[item].tolist():
                try:
                    records.append(build(names[tag_id], values[position], step, wall_time))
                except ValueError:  # e.g. a step outside int64: that event is lost, as with the per-record path
                    pass
                position += 1
        return records

    def _run_layout(self, ids: np.ndarray, step_bytes: int, has_wall: bool) -> _RunLayout:
        key = (ids.tobytes(), step_bytes, has_wall)
        layout = self._run_layouts.get(key)
        if layout is None:
            if len(self._run_layouts) >= 256:
                self._run_layouts.clear()
            layout = self._run_layouts[key] = _RunLayout([self._layout(i, step_bytes, has_wall) for i in ids.tolist()])
        return layout

    def _layout(self, tag_id: int, step_bytes: int, has_wall: bool) -> _Layout:
        key = (tag_id, step_bytes, has_wall)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = _Layout(self._names[tag_id], step_bytes, has_wall)
        return layout


class _RunLayout:
    """The records of one step that logs these tags (one ``_Layout`` each) side by side: a run of such steps is
    one (steps, bytes) array, built and checksummed with a fixed number of NumPy calls whatever the tag count."""

    __slots__ = ("template", "wall_columns", "step_columns", "step_bytes", "value_columns", "variable", "table",
                 "offsets", "base_crc", "crc_columns", "tags")

    def __init__(self, layouts: list[_Layout]) -> None:
        starts = np.cumsum([0] + [layout.template.size for layout in layouts[:-1]])
        self.tags = len(layouts)
        self.template = np.concatenate([layout.template for layout in layouts])
        self.step_bytes = layouts[0].step_bytes
        has_wall = layouts[0].wall_at >= 0
        self.wall_columns = np.concatenate([start + 12 + layout.wall_at + np.arange(8) for start, layout in
                                            zip(starts, layouts)]) if has_wall else None
        self.step_columns = np.concatenate([start + 12 + layout.step_at + np.arange(self.step_bytes) for start, layout
                                            in zip(starts, layouts)]) if self.step_bytes else None
        self.value_columns = np.concatenate([start + 12 + layout.value_at + np.arange(4)
                                             for start, layout in zip(starts, layouts)])
        self.variable = np.concatenate([start + layout.variable for start, layout in zip(starts, layouts)])
        self.table = np.concatenate([layout.table for layout in layouts])
        self.offsets = np.arange(self.variable.size, dtype=np.intp) * 256
        self.base_crc = np.array([layout.base_crc for layout in layouts], dtype=np.uint32)
        self.crc_columns = np.concatenate([start + layout.template.size - 4 + np.arange(4)
                                           for start, layout in zip(starts, layouts)])

    def encode(self, wall_bytes: np.ndarray, steps: np.ndarray, value_bytes: np.ndarray) -> bytes:
        """Framed records of a run of steps: ``wall_bytes`` (steps, 8), ``steps`` (uint64), ``value_bytes`` (steps,
        4 × tags), row-major: step after step, each step's tags in order."""
        count = len(steps)
        block = np.empty((count, self.template.size), dtype=np.uint8)
        block[:] = self.template
        if self.wall_columns is not None:
            block[:, self.wall_columns] = np.tile(wall_bytes, (1, self.tags))
        if self.step_columns is not None:
            varint = np.empty((count, self.step_bytes), dtype=np.uint8)
            remaining = steps
            for k in range(self.step_bytes):
                low = (remaining & np.uint64(0x7F)).astype(np.uint8)
                varint[:, k] = low | np.uint8(0x80) if k < self.step_bytes - 1 else low
                remaining = remaining >> np.uint64(7)
            block[:, self.step_columns] = np.tile(varint, (1, self.tags))
        block[:, self.value_columns] = value_bytes
        contributions = self.table[block[:, self.variable] + self.offsets].reshape(count, self.tags, -1)
        crc = (np.bitwise_xor.reduce(contributions, axis=2) ^ self.base_crc).astype(np.uint64)
        masked = masked_crc32c_array(crc).astype("<u4", order="C")
        block[:, self.crc_columns] = masked.view(np.uint8).reshape(count, -1)
        return block.tobytes()
