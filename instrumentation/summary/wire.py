"""Protobuf wire-format pieces for events built by hand (byte-identical to what the protobuf runtime writes)."""
from __future__ import annotations

import struct

import numpy as np

_DOUBLE = struct.Struct("<d")
_ZERO_DOUBLE = bytes(8)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def varint(number: int) -> bytes:
    """An unsigned varint; a negative int64 as protobuf writes it (its 64-bit two's complement, 10 bytes)."""
    if number < 0:
        number += 1 << 64
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        if number:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def double_field(key: int, value: float) -> bytes:
    """A proto3 double: absent when all its bits are zero (so -0.0 is written, as protobuf does)."""
    packed = _DOUBLE.pack(value)
    return b"" if packed == _ZERO_DOUBLE else bytes((key,)) + packed


def int64_field(key: int, value: int) -> bytes:
    """A proto3 int64: absent when 0. ``value`` must fit in int64 (protobuf refuses the others)."""
    return bytes((key,)) + varint(value) if value else b""


def length_delimited(key: int, payload: bytes) -> bytes:
    return bytes((key,)) + varint(len(payload)) + payload


def packed_doubles(key: int, values: np.ndarray) -> bytes:
    """A packed repeated double (proto3's encoding of repeated scalars); absent when empty."""
    if not values.size:
        return b""
    return length_delimited(key, np.ascontiguousarray(values, dtype="<f8").tobytes())
