"""Device memory through engine.memory on a real CUDA device: the CuPy allocator hook, limit, growth, fragmentation,
OOM translation, and the memory tracker's device figures against CuPy's pool figures."""
from __future__ import annotations

import gc
import os

import pytest

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the CUDA memory tests need it and a device")

import engine  # noqa: E402
from engine import hooks, memory  # noqa: E402
from engine.backend.cuda import memory as device_memory  # noqa: E402
from engine.cuda import memory as cuda_memory  # noqa: E402

# tests/gpu/conftest.py marks these `gpu` and skips them, with the reason, where no CUDA device answers
MiB = 1 << 20
DEVICE = "cuda:0"


@pytest.fixture()
def pool():
    with cupy.cuda.Device(0):
        device_memory.install()
        pool = device_memory.pool_of(0)
        gc.collect()
        yield pool
        cuda_memory.set_memory_growth(True, 0)  # first: growth off with no limit would reserve most of the device
        cuda_memory.set_memory_limit(None, 0)
        gc.collect()


def outside_the_pool() -> int:
    """Device bytes the engine counts per tensor (arrays made before the hook was installed)."""
    return sum(b.bytes for b in memory.live_blocks(DEVICE) if b.buffer_id > 0)


def test_every_cupy_buffer_is_an_engine_block_with_the_pools_sizes(pool) -> None:
    before = memory.allocated_bytes(DEVICE)
    assert before == pool.pool.used_bytes() + outside_the_pool()
    arrays = [cupy.empty(n, dtype=cupy.uint8) for n in (1, 511, 513, 3 * MiB + 5)]
    expected = sum(device_memory.round_request(n) for n in (1, 511, 513, 3 * MiB + 5))
    assert memory.allocated_bytes(DEVICE) - before == expected
    assert memory.allocated_bytes(DEVICE) == pool.pool.used_bytes() + outside_the_pool()
    assert memory.reserved_bytes(DEVICE) == pool.pool.total_bytes()
    scratch = (arrays[3] + 1).sum()  # an op's temporaries come and go through the hook too
    del scratch
    del arrays
    gc.collect()
    assert memory.allocated_bytes(DEVICE) == before == pool.pool.used_bytes() + outside_the_pool()


def test_a_tensor_claims_its_block_with_its_category(pool) -> None:
    array = cupy.ones((256, 256), dtype=cupy.float32)
    key = memory.register(array, "parameter", "test")
    [block] = [b for b in memory.live_blocks(DEVICE) if b.buffer_id == key]
    assert (block.category, block.op, block.bytes) == ("parameter", "test", 256 * 256 * 4)
    assert {k: tensors for k, *_, tensors in memory.live_buffers()}[key] == 1
    memory.release(key)
    assert any(b.buffer_id == key for b in memory.live_blocks(DEVICE))  # the array still holds it
    del array
    gc.collect()
    assert not any(b.buffer_id == key for b in memory.live_blocks(DEVICE))


def test_over_limit_request_raises_and_the_tracker_captures_it(pool, tmp_path) -> None:
    from instrumentation import MemoryTracker, SummaryWriter
    from instrumentation.format.memory_snapshot import list_snapshots

    cuda_memory.set_memory_limit(memory.allocated_bytes(DEVICE) + 2 * MiB, 0)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=None, host_rss=False)
        kept = cupy.empty(MiB, dtype=cupy.uint8)
        with pytest.raises(engine.OutOfMemoryError, match="out of memory on cuda:0") as refused:
            cupy.empty(4 * MiB, dtype=cupy.uint8)
        tracker.close()
    assert refused.value.limit_bytes is not None and refused.value.requested_bytes == 4 * MiB
    assert [s.reason for s in list_snapshots(tmp_path / "run")] == ["oom"]
    del kept


def test_a_real_device_refusal_becomes_out_of_memory_error(pool) -> None:
    free, total = cupy.cuda.runtime.memGetInfo()
    with pytest.raises(engine.OutOfMemoryError, match="the system refused it") as refused:
        cupy.empty(2 * total, dtype=cupy.uint8)
    assert refused.value.limit_bytes is None and refused.value.device == DEVICE


def test_growth_off_reserves_up_front(pool) -> None:
    pool.pool.free_all_blocks()
    limit = memory.allocated_bytes(DEVICE) + 256 * MiB
    cuda_memory.set_memory_limit(limit, 0)
    cuda_memory.set_memory_growth(False, 0)
    reserved = cuda_memory.memory_stats(0)["reserved_bytes"]
    assert reserved >= 256 * MiB
    arrays = [cupy.empty(16 * MiB, dtype=cupy.uint8) for _ in range(8)]
    assert cuda_memory.memory_stats(0)["reserved_bytes"] == reserved  # served from the reservation
    del arrays


def test_fragmentation_is_the_free_chunks_too_small_for_the_request(pool) -> None:
    pool.pool.free_all_blocks()
    blocks = [cupy.empty(MiB, dtype=cupy.uint8) for _ in range(32)]
    holes = blocks[::2]
    del blocks[::2]
    del holes
    gc.collect()
    stats = cuda_memory.memory_stats(0, request_bytes=4 * MiB)
    chunks = pool.free_chunk_bytes()
    assert chunks is not None, "this CuPy does not expose its free chunks (_debug_arena_get_index)"
    assert stats["fragmentation_bytes"] == sum(c for c in chunks if c < 4 * MiB)
    assert stats["fragmentation_bytes"] >= 16 * MiB  # 16 one-MiB holes between live blocks cannot merge
    small = cuda_memory.memory_stats(0, request_bytes=MiB)["fragmentation_bytes"]
    assert small == sum(c for c in chunks if c < MiB) and small < stats["fragmentation_bytes"]
    del blocks


def test_tracker_device_figures_equal_the_pools(pool, tmp_path) -> None:
    from instrumentation import MemoryTracker, SummaryWriter
    from instrumentation.format import EventFileReader, ScalarValue

    hooks.reset_step(0)
    expected = {}
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, every=1, batch_steps=1, leak=None, host_rss=False)
        kept = []
        offset = outside_the_pool()
        for step in range(4):
            kept.append(cupy.ones(MiB * (step + 1), dtype=cupy.uint8))
            scratch = kept[-1] * 2
            del scratch
            hooks.mark_step_end()
            expected[step] = (pool.pool.used_bytes() + offset, pool.pool.total_bytes())
        tracker.close()
    found: dict[str, dict[int, float]] = {}
    for name in os.listdir(tmp_path / "run"):
        if name.startswith("events"):
            for event in EventFileReader(tmp_path / "run" / name).read():
                for value in event.values:
                    if isinstance(value, ScalarValue):
                        found.setdefault(value.tag, {})[value.step] = value.value
    for step, (used, total) in expected.items():
        assert found["mem/cuda:0/allocated_bytes"][step] == used
        assert found["mem/cuda:0/reserved_bytes"][step] == total
    del kept
