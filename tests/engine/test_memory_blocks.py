"""engine.memory's per-buffer metadata, category counters, step peak and peak capture, against hand-counted bytes."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import engine
from engine import hooks, memory
from engine import memory_recording as recording


@pytest.fixture(autouse=True)
def _clean():
    gc.collect()
    hooks.reset_step(0)
    yield
    recording.arm_peak_capture("cpu", None)
    recording.take_peak_capture("cpu")
    hooks.reset_step(0)


def test_live_blocks_carry_register_time_metadata() -> None:
    hooks.reset_step(7)
    x = engine.tensor(np.ones((5, 3), np.float32))
    y = x * 2.0
    blocks = {b.buffer_id: b for b in memory.live_blocks("cpu")}
    bx = blocks[x._mem_key]
    assert (bx.bytes, bx.shape, bx.dtype, bx.category, bx.step, bx.device) == (60, (5, 3), "float32", "input", 7, "cpu")
    view = x.reshape(15)  # a view: one more tensor reference to x's buffer, no new block
    assert {key: tensors for key, *_, tensors in memory.live_buffers()}[x._mem_key] == 2
    assert view._mem_key == x._mem_key and [b for b in memory.live_blocks("cpu") if b.buffer_id == x._mem_key] == [bx]
    by = blocks[y._mem_key]
    assert (by.bytes, by.shape, by.category, by.phase) == (60, (5, 3), "activation", "forward") and by.op
    with pytest.raises(AttributeError):
        by.bytes = 1  # frozen
    assert {b.buffer_id for b in memory.live_blocks()} == {key for key, *_ in memory.live_buffers()}
    del x, y


def test_category_bytes_sum_the_live_buffers() -> None:
    keep = [engine.tensor(np.ones(100, np.float32)), engine.tensor(np.ones(10, np.float64))]
    expected: dict[str, int] = {}
    for _, nbytes, device, category, _ in memory.live_buffers():
        if device == "cpu":
            expected[category] = expected.get(category, 0) + nbytes
    assert {k: v for k, v in memory.category_bytes("cpu").items() if v} == expected
    assert sum(memory.category_bytes("cpu").values()) == memory.allocated_bytes("cpu")
    del keep


def test_step_peak_keeps_the_categories_at_the_peak() -> None:
    memory.reset_step_peak("cpu")
    start, before = memory.allocated_bytes("cpu"), memory.category_bytes("cpu")
    a = engine.tensor(np.ones(1000, np.float32))  # input, 4000 bytes
    b = a * 3.0  # activation, 4000 bytes: the peak
    del a, b
    c = engine.tensor(np.ones(10, np.float32))
    peak = memory.step_peak("cpu")
    assert start + 8000 <= peak.bytes <= start + 8016  # (+ the constant 3.0, a 0-d tensor)
    assert sum(peak.by_category.values()) == peak.bytes
    assert peak.by_category.get("input", 0) >= before.get("input", 0) + 4000
    assert peak.by_category.get("activation", 0) == before.get("activation", 0) + 4000
    memory.reset_step_peak("cpu")
    assert memory.step_peak("cpu").bytes == memory.allocated_bytes("cpu") == start + 40
    del c


def test_peak_capture_holds_the_blocks_live_at_the_peak() -> None:
    memory.reset_step_peak("cpu")
    start = memory.allocated_bytes("cpu")
    recording.arm_peak_capture("cpu", start + 6000)
    small = engine.tensor(np.ones(500, np.float32))  # 2000 bytes: below the armed size
    del small
    assert recording.take_peak_capture("cpu") is None
    a = engine.tensor(np.ones((10, 100), np.float32))
    b = a + 1.0  # 8000 bytes live: captured at the first free after it
    del a, b
    capture = recording.take_peak_capture("cpu")
    assert capture is not None and start + 8000 <= capture.bytes <= start + 8016
    assert sum(blk.bytes for blk in capture.blocks) == capture.bytes
    assert sorted(blk.category for blk in capture.blocks if blk.shape == (10, 100)) == ["activation", "input"]
    assert recording.take_peak_capture("cpu") is None  # taken once
    with pytest.raises(ValueError, match="peak capture size"):
        recording.arm_peak_capture("cpu", -1)


def test_live_groups_sum_the_live_blocks():
    import collections

    import engine

    keep = [engine.tensor(np.ones((3, 4), dtype=np.float32)) for _ in range(3)] + [engine.tensor(np.ones(5))]
    expected = collections.defaultdict(lambda: [0, 0])
    for b in engine.memory.live_blocks():
        group = expected[(b.device, b.op, b.module, b.shape, b.dtype, b.category)]
        group[0] += b.bytes
        group[1] += 1
    groups = engine.memory.live_groups()
    assert groups == {key: tuple(value) for key, value in expected.items()}
    assert groups[("cpu", "tensor", "", (3, 4), "float32", "input")][1] >= 3
    del keep
