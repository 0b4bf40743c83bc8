"""The one scalar encoder: ``scalar(tag, value, step, wall_time) -> bytes``, an Event as TensorBoard reads it.

An Event holding ``simple_value``s (one: what ``add_scalar`` writes, as torch does; several: one step of
``add_scalar_rows``, TensorFlow 1's merged-summary form, which every TensorBoard reader takes) is a fixed byte layout
per (tags, step varint length, wall time present): only the wall time, the step and the values vary.
``ScalarLayout`` keeps that layout as one ``struct`` whose constant pieces are ``s`` arguments, so an Event costs one
``pack`` whatever its number of values, byte-identical to protobuf's serialization (tests/instrumentation/summary
check it against protobuf and TensorBoard's reader). ``variable_bytes`` gives the varying bytes of many Events of
one layout at once, for ``record_blocks.BlockFramer``. Unframed: framing is ``instrumentation.format.records``.
"""
from __future__ import annotations

import math
import struct
import time
from collections.abc import Sequence

import numpy as np

from instrumentation.summary.wire import INT64_MAX, INT64_MIN, varint

_WALL_KEY, _STEP_KEY, _SUMMARY_KEY, _VALUE_KEY, _TAG_KEY, _SIMPLE_VALUE_KEY = 0x09, 0x10, 0x2A, 0x0A, 0x0A, 0x15
_VARINT_1 = [bytes((step,)) for step in range(128)]
_LAYOUTS_MAX = 4096  # a program inventing tags: the cache starts over rather than grow


def step_bytes(step: int) -> int:
    """Bytes of the step's varint in an Event: 0 for step 0 (omitted), 10 for a negative step (int64 sign-extended).
    ValueError for a step beyond int64, which protobuf refuses too."""
    if step > 0:
        if step <= INT64_MAX:
            return (step.bit_length() + 6) // 7
    elif step == 0:
        return 0
    elif step >= INT64_MIN:
        return 10
    raise ValueError(f"step {step} does not fit an int64 (an Event's step)")


def has_wall(wall_time: float) -> bool:
    """proto3 writes a double unless all its bits are zero (so -0.0 and NaN are written)."""
    return wall_time != 0.0 or math.copysign(1.0, wall_time) < 0.0 or wall_time != wall_time


def _to_float32_range(values: Sequence[float]) -> list[float]:
    """Values beyond float32 as the cast makes them (±inf), as protobuf stores them; struct refuses them."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64).tolist()


class ScalarLayout:
    """The serialized Event holding one ``simple_value`` per tag, for a step varint length (0: step 0, omitted) and
    wall time present or not: ``template`` with zeros where the wall time, step and values go, at
    ``variable_offsets`` (the wall time's 8 bytes, the step's, 4 per value, in that order)."""

    __slots__ = ("tags", "step_bytes", "has_wall", "template", "variable_offsets", "_pack", "_args", "_wall_arg",
                 "_step_arg", "_first_value_arg", "_shifts")

    def __init__(self, tags: tuple[str, ...], step_length: int, walled: bool) -> None:
        pieces: list[tuple[str, bytes]] = []  # (kind, bytes): constants, and zeros where the wall/step/values go
        entries = []
        for tag in tags:
            name = tag.encode("utf-8")
            value = bytes([_TAG_KEY]) + varint(len(name)) + name + bytes([_SIMPLE_VALUE_KEY]) + bytes(4)
            entries.append(bytes([_VALUE_KEY]) + varint(len(value)) + value)
        if walled:
            pieces += [("const", bytes([_WALL_KEY])), ("wall", bytes(8))]
        if step_length:
            pieces += [("const", bytes([_STEP_KEY])), ("step", bytes(step_length))]
        pieces.append(("const", bytes([_SUMMARY_KEY]) + varint(sum(map(len, entries)))))
        for entry in entries:
            pieces += [("const", entry[:-4]), ("value", bytes(4))]
        merged: list[tuple[str, bytes]] = []  # adjacent constants as one struct field
        for kind, payload in pieces:
            if kind == "const" and merged and merged[-1][0] == "const":
                merged[-1] = ("const", merged[-1][1] + payload)
            else:
                merged.append((kind, payload))
        codes = {"wall": "d", "step": f"{step_length}s", "value": "f"}
        self._pack = struct.Struct("<" + "".join(codes.get(kind, f"{len(payload)}s") for kind, payload in merged)).pack
        self._args = [payload if kind == "const" else None for kind, payload in merged]
        kinds = [kind for kind, _ in merged]
        self._wall_arg = kinds.index("wall") if walled else -1
        self._step_arg = kinds.index("step") if step_length else -1
        self._first_value_arg = kinds.index("value")  # from here on: value, constant, value, ..., value
        self.tags, self.step_bytes, self.has_wall = tags, step_length, walled
        self.template = b"".join(payload for _, payload in merged)
        offsets, offset = [], 0
        for kind, payload in merged:
            if kind != "const":
                offsets += range(offset, offset + len(payload))
            offset += len(payload)
        self.variable_offsets = offsets
        self._shifts = np.arange(step_length, dtype=np.uint64) * np.uint64(7)

    def body(self, values: Sequence[float], step: int, wall_time: float) -> bytes:
        """One Event (values beyond float32 become ±inf, as protobuf's float field makes them); ``step`` and
        ``wall_time`` must have this layout's step length and wall-time presence."""
        args = self._args.copy()  # NOTE: a copy: layouts are shared by every writer thread
        if self._wall_arg >= 0:
            args[self._wall_arg] = wall_time
        if self._step_arg >= 0:
            length = self.step_bytes
            args[self._step_arg] = (_VARINT_1[step] if length == 1 else
                                    bytes(((step & 0x7F) | 0x80, step >> 7)) if length == 2 else varint(step))
        args[self._first_value_arg::2] = values
        try:
            return self._pack(*args)
        except OverflowError:
            args[self._first_value_arg::2] = _to_float32_range(values)
            return self._pack(*args)

    def variable_bytes(self, values: np.ndarray, steps: np.ndarray, walls: np.ndarray | None) -> np.ndarray:
        """The bytes at ``variable_offsets`` of ``len(steps)`` Events, one row each: ``values`` (n, tags) float64,
        ``steps`` int64 (each with this layout's varint length), ``walls`` float64 (None without wall times)."""
        count = len(steps)
        columns = [] if walls is None else [walls.astype("<f8").view(np.uint8).reshape(count, 8)]
        if self.step_bytes:  # protobuf's varint (a negative step: its 64-bit two's complement, 10 bytes)
            digits = ((steps.view(np.uint64)[:, None] >> self._shifts) & np.uint64(0x7F)).astype(np.uint8)
            digits[:, :-1] |= np.uint8(0x80)
            columns.append(digits)
        with np.errstate(over="ignore"):  # beyond float32: ±inf, as protobuf's float field makes them
            columns.append(values.astype("<f4").view(np.uint8).reshape(count, -1))
        return np.concatenate(columns, axis=1)


_LAYOUTS: dict[tuple[tuple[str, ...], int, bool], ScalarLayout] = {}


def layout_of(tags: tuple[str, ...], step: int, wall_time: float) -> ScalarLayout:
    """The layout of an Event of ``tags`` at ``step`` and ``wall_time`` (kept for the next Event of its kind)."""
    key = (tags, step_bytes(step), has_wall(wall_time))
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = ScalarLayout(*key)
    return layout


def scalar_row(tags: tuple[str, ...], values: Sequence[float], step: int, wall_time: float) -> bytes:
    """One Event holding a ``simple_value`` per tag (aligned ``values``, at least one), in order."""
    return layout_of(tags, step, wall_time).body(values, step, wall_time)


def scalar(tag: str, value: float, step: int, wall_time: float | None = None) -> bytes:
    """One Event holding ``value`` as the ``simple_value`` of ``tag`` (what torch's ``add_scalar`` writes); wall time
    None: now. ValueError for a step beyond int64."""
    if wall_time is None:
        wall_time = time.time()
    return layout_of((tag,), step, wall_time).body((value,), step, wall_time)


_STEP_BOUNDS = np.asarray([1 << (7 * k) for k in range(1, 9)], np.int64)  # 128, 16384, ... 2^56


def layout_runs(tags: tuple[str, ...], steps: np.ndarray, walls: np.ndarray) -> list[tuple[ScalarLayout, int, int]]:
    """(layout, start, stop): the runs of consecutive Events of ``tags`` at int64 ``steps`` and float64 ``walls``
    that share a layout, in order."""
    first, last = int(steps[0]), int(steps[-1])
    if 0 < first <= last and step_bytes(first) == step_bytes(last) and walls.all() and \
            (steps[1:] >= steps[:-1]).all():  # NOTE: the common block: rising steps, one layout
        return [(layout_of(tags, first, 1.0), 0, len(steps))]
    lengths = np.searchsorted(_STEP_BOUNDS, steps, side="right") + 1
    lengths[steps == 0] = 0
    lengths[steps < 0] = 10
    walled = walls.view(np.uint64) != 0  # proto3 writes a double unless all its bits are zero
    keys = lengths * 2 + walled
    cuts = (np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()
    return [(layout_of(tags, int(steps[start]), float(walled[start])), start, stop)
            for start, stop in zip([0, *cuts], [*cuts, len(steps)])]
