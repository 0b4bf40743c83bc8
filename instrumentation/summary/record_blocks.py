"""Framing many records of one length that differ only at known offsets, in a few NumPy passes.

Such a block (``n`` scalar Events of one ``ScalarLayout``) is a tiled template with each record's varying bytes
written in, and each record's CRC-32C is computed for all rows at once: for data of a fixed length the CRC is affine
over GF(2), so ``crc(row) = crc(template) ^ XOR over variable offsets p of table_p[row[p]]``, where ``table_p[b]`` is
the CRC's linear part of byte ``b`` alone at ``p`` (``record_headers.crc_byte_tables``, once per template). The
cost is a dozen NumPy calls whatever ``n``; the same bytes as ``instrumentation.format.records.frame_records`` of
each record's data.
"""
from __future__ import annotations

import numpy as np
from google_crc32c import value as crc32c

from instrumentation.format.record_headers import FOOTER_BYTES, HEADER_BYTES, crc_byte_tables, masked_crc32c_array
from instrumentation.format.records import record_header

BLOCK_MIN_RECORDS = 24  # fewer records: framed one by one (a block's dozen NumPy calls cost more below ~20)


class BlockFramer:
    """Frames records whose data is ``template`` with other bytes at ``variable_offsets``."""

    __slots__ = ("template", "positions", "crc_tables", "template_crc", "_rows")

    def __init__(self, template: bytes, variable_offsets: list[int]) -> None:
        self.template = np.frombuffer(record_header(len(template)) + template + bytes(FOOTER_BYTES), np.uint8)
        self.positions = np.asarray(variable_offsets, np.intp) + HEADER_BYTES
        self.template_crc = np.uint32(crc32c(template))
        self.crc_tables = crc_byte_tables(len(template), variable_offsets).reshape(-1)  # NOTE: flat, for one take()
        self._rows = np.arange(len(variable_offsets), dtype=np.int32) * 256  # row starts in crc_tables, flattened

    def frame(self, variable: np.ndarray) -> bytes:
        """The framed records, one per row of ``variable`` (uint8, the bytes at ``variable_offsets``), joined."""
        count = len(variable)
        records = np.empty((count, len(self.template)), np.uint8)
        records[:] = self.template
        records[:, self.positions] = variable
        crc = np.bitwise_xor.reduce(self.crc_tables.take(variable + self._rows), axis=1) ^ self.template_crc
        masked = masked_crc32c_array(crc.astype(np.uint64)).astype("<u4")
        records[:, -FOOTER_BYTES:] = masked.view(np.uint8).reshape(count, FOOTER_BYTES)
        return records.tobytes()
