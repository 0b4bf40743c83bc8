"""Many scalar events of one layout framed in a few NumPy passes: the bytes ``_EventLayout.record`` gives each, joined.

A block of ``n`` events with the same tags, step varint length and wall-time presence differs only in its variable
bytes (wall time, step, values). The records are a tiled template with those bytes written in, and each record's
CRC-32C is computed for all rows at once: for data of a fixed length the CRC is affine over GF(2), so
``crc(row) = crc(template) ^ XOR over variable positions p of table_p[row[p]]``, where ``table_p[b]`` is the CRC's
linear part of byte ``b`` alone at ``p`` (``record_headers.crc_byte_tables``, once per layout). The cost is a dozen NumPy
calls whatever ``n``; one event through ``record`` costs a ``struct.pack`` and a CRC call (about 1 µs).
"""
from __future__ import annotations

import numpy as np
from google_crc32c import value as crc32c

from instrumentation.format.record_headers import (FOOTER_BYTES, HEADER_BYTES, crc_byte_tables,
                                                   masked_crc32c_array)


class BlockLayout:
    """What a block encoder needs of one event layout: the framed template (header, data with zeros where the wall
    time, step and values go, footer), the record positions of those variable bytes (wall time, step, values, in
    that order) and their CRC tables, flattened."""

    __slots__ = ("template", "positions", "step_bytes", "crc_tables", "template_crc", "_rows", "_shifts")

    def __init__(self, header: bytes, data_template: bytes, wall_offset: int, step_offset: int, step_bytes: int,
                 value_offsets: list[int]) -> None:
        self.template = np.frombuffer(header + data_template + bytes(FOOTER_BYTES), np.uint8)
        offsets: list[int] = []
        if wall_offset >= 0:
            offsets += range(wall_offset, wall_offset + 8)
        if step_offset >= 0:
            offsets += range(step_offset, step_offset + step_bytes)
        for offset in value_offsets:
            offsets += range(offset, offset + 4)
        self.positions = np.asarray(offsets, np.intp) + HEADER_BYTES
        self.step_bytes = step_bytes
        self.template_crc = np.uint32(crc32c(data_template))
        self.crc_tables = crc_byte_tables(len(data_template), offsets).reshape(-1)  # NOTE: flat, for one take()
        self._rows = np.arange(len(offsets), dtype=np.int32) * 256  # row starts in crc_tables, flattened
        self._shifts = np.arange(step_bytes, dtype=np.uint64) * np.uint64(7)

    def frame(self, values: np.ndarray, steps: np.ndarray, walls: np.ndarray | None) -> bytes:
        """The framed records of ``len(steps)`` events: ``values`` (n, tags) float64, ``steps`` int64 (each with
        this layout's varint length), ``walls`` float64 (None when the layout has no wall time)."""
        count = len(steps)
        columns = [] if walls is None else [walls.view(np.uint8).reshape(count, 8)]
        if self.step_bytes:  # protobuf's varint (a negative step: its 64-bit two's complement, 10 bytes)
            digits = ((steps.view(np.uint64)[:, None] >> self._shifts) & np.uint64(0x7F)).astype(np.uint8)
            digits[:, :-1] |= np.uint8(0x80)
            columns.append(digits)
        with np.errstate(over="ignore"):  # beyond float32: ±inf, as protobuf's float field makes them
            columns.append(values.astype("<f4").view(np.uint8).reshape(count, -1))
        variable = np.concatenate(columns, axis=1)
        records = np.empty((count, len(self.template)), np.uint8)
        records[:] = self.template
        records[:, self.positions] = variable
        crc = np.bitwise_xor.reduce(self.crc_tables.take(variable + self._rows), axis=1) ^ self.template_crc
        masked = masked_crc32c_array(crc.astype(np.uint64)).astype("<u4")
        records[:, -FOOTER_BYTES:] = masked.view(np.uint8).reshape(count, FOOTER_BYTES)
        return records.tobytes()


_STEP_BOUNDS = np.asarray([1 << (7 * k) for k in range(1, 9)], np.int64)  # 128, 16384, ... 2^56


def step_lengths(steps: np.ndarray) -> np.ndarray:
    """The varint length of each int64 step in an Event: 0 for step 0 (omitted), 10 for a negative step."""
    lengths = np.searchsorted(_STEP_BOUNDS, steps, side="right") + 1
    lengths[steps == 0] = 0
    lengths[steps < 0] = 10
    return lengths


def has_walls(walls: np.ndarray) -> np.ndarray:
    """Whether proto3 writes each wall time: unless all its bits are zero (so -0.0 and NaN are written)."""
    return walls.view(np.uint64) != 0
