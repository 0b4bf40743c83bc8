"""Device memory accounting on the CPU: the pure decisions of the CUDA pool hook and engine.memory's pool blocks.

The CuPy glue itself runs in tests/gpu/test_memory_gpu.py; here the inputs are real numbers and real exceptions."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

import engine
from engine import hooks, memory
from engine.backend.cuda import memory as device_memory

DEVICE = "cuda:7"  # a device name the allocator accounts for; no device is touched
MiB = 1 << 20


@pytest.fixture()
def device() -> Iterator[str]:
    yield DEVICE
    for key, *_ in memory.live_buffers():
        if key < 0:
            memory.release_block(key)
    memory.set_limit(None, DEVICE)
    memory.detach_pool(DEVICE)
    memory._devices.pop(DEVICE, None)  # NOTE: later trackers must not see a device this test made up


def test_requests_round_up_to_the_pool_unit() -> None:
    assert [device_memory.round_request(n) for n in (0, 1, 511, 512, 513, 4096)] == [0, 512, 512, 512, 1024, 4096]
    with pytest.raises(ValueError, match="got -1"):
        device_memory.round_request(-1)


def test_limit_decision() -> None:
    assert not device_memory.exceeds_limit(512, 1024, None)
    assert not device_memory.exceeds_limit(512, 1024, 1536)  # exactly at the limit is allowed
    assert device_memory.exceeds_limit(1024, 1024, 1536)


def test_fragmentation_counts_free_chunks_smaller_than_the_request() -> None:
    chunks = [512, 4096, 1536, 8192, 1024]
    assert device_memory.fragmentation_bytes(chunks, 2048) == 512 + 1536 + 1024
    assert device_memory.fragmentation_bytes(chunks, 512) == 0  # every chunk serves a 512-byte request
    assert device_memory.fragmentation_bytes(chunks, 10_000) == sum(chunks)
    assert device_memory.largest_free_block(chunks) == 8192
    assert device_memory.largest_free_block([]) == 0


def test_up_front_reserve_without_growth() -> None:
    assert device_memory.up_front_reserve_bytes(True, 8 * MiB, 0, 80 * MiB) == 0
    assert device_memory.up_front_reserve_bytes(False, 8 * MiB, 2 * MiB, 80 * MiB) == 6 * MiB
    assert device_memory.up_front_reserve_bytes(False, 8 * MiB, 9 * MiB, 80 * MiB) == 0
    no_limit = device_memory.up_front_reserve_bytes(False, None, 0, 1000 * MiB)
    assert no_limit == 900 * MiB and no_limit % device_memory.ALLOCATION_UNIT_BYTES == 0


class CudaRuntimeError(RuntimeError):
    """Shaped as cupy_backends' CUDARuntimeError: a RuntimeError with the CUDA status code."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def test_device_refusals_are_recognised_and_other_errors_are_not() -> None:
    pool_error = MemoryError("Out of memory allocating 1,024 bytes (allocated so far: 2,048 bytes).")
    assert "Out of memory allocating 1,024 bytes" in device_memory.device_oom_reason(pool_error)
    runtime = CudaRuntimeError(2, "cudaErrorMemoryAllocation: out of memory")
    assert device_memory.device_oom_reason(runtime) == "CudaRuntimeError: cudaErrorMemoryAllocation: out of memory"
    assert device_memory.device_oom_reason(CudaRuntimeError(700, "cudaErrorIllegalAddress")) is None
    assert device_memory.device_oom_reason(ValueError("bad")) is None
    own = engine.OutOfMemoryError(1, 0, 0, DEVICE, "", "")
    assert device_memory.device_oom_reason(own) is None  # the engine's own error is already announced


def test_pool_blocks_are_counted_until_their_pointer_dies(device: str) -> None:
    before = memory.stats(device)
    first = memory.register_block(0x7F00_0000_0000, 4096, device)
    second = memory.register_block(0x7F00_0000_2000, 1024, device, op="Linear")
    stats = memory.stats(device)
    assert stats.allocated_bytes == before.allocated_bytes + 5120
    assert stats.live_buffers == before.live_buffers + 2
    assert memory.category_bytes(device)["temporary"] == 5120
    assert {block.op for block in memory.live_blocks(device)} == {"", "Linear"}
    tensors = {key: count for key, _, on, _, count in memory.live_buffers() if on == device}
    assert tensors == {first: 0, second: 0}
    memory.release_block(first)
    memory.release_block(first)  # twice is harmless
    assert memory.allocated_bytes(device) == before.allocated_bytes + 1024
    memory.release_block(second)
    assert memory.allocated_bytes(device) == before.allocated_bytes
    assert memory.stats(device).peak_bytes >= 5120


def test_an_over_limit_request_raises_after_the_oom_hook(device: str) -> None:
    memory.set_limit(2048, device)
    memory.register_block(0x7F00_0001_0000, 1536, device)
    memory.check_device_room(device, 512)  # exactly to the limit: allowed
    seen: list[hooks.OomEvent] = []

    class Observer:
        def oom(self, event: hooks.OomEvent) -> None:
            seen.append(event)

    observer = Observer()
    hooks.add_recorder(observer)
    try:
        with pytest.raises(engine.OutOfMemoryError, match="out of memory on cuda:7") as refused:
            memory.check_device_room(device, 1024, "MatMul")
        translated = memory.refused_by_device(4096, device, "cudaErrorMemoryAllocation: out of memory")
    finally:
        hooks.remove_recorder(observer)
    error = refused.value
    assert (error.requested_bytes, error.allocated_bytes, error.limit_bytes) == (1024, 1536, 2048)
    assert refused.value.op == "MatMul"
    assert isinstance(translated, engine.OutOfMemoryError) and "the system refused it: cudaError" in str(translated)
    assert [(e.requested_bytes, e.device) for e in seen] == [(1024, device), (4096, device)]


def test_pool_figures_are_the_devices_reserved_bytes(device: str) -> None:
    memory.register_block(0x7F00_0002_0000, 2048, device)
    chunks = (512, 1536, 8192)
    memory.attach_pool(device, lambda: memory.PoolStats(
        device, memory.allocated_bytes(device), 2048 + sum(chunks), 2048, None, 2048, chunks,
        device_memory.fragmentation_bytes(chunks, 2048), device_memory.largest_free_block(chunks), True))
    assert memory.reserved_bytes(device) == 2048 + 10240
    assert memory.stats(device).reserved_bytes == 2048 + 10240
    assert memory.pool_stats(device).fragmentation_bytes == 2048
    assert memory.pool_stats("cpu") is None
    assert memory.reserved_bytes("cpu") == memory.allocated_bytes("cpu")


def test_device_names_of_the_cuda_memory_api() -> None:
    from engine.cuda.memory import _device_id

    assert [_device_id(0), _device_id(3), _device_id("cuda:2")] == [0, 3, 2]
    for bad, error in (("cpu", ValueError), ("cuda:x", ValueError), (-1, ValueError), (True, TypeError),
                       (1.5, TypeError)):
        with pytest.raises(error, match="device"):
            _device_id(bad)


def test_the_pool_hook_is_installed_when_the_engine_first_holds_a_device_array(monkeypatch, capsys) -> None:
    from engine.backend import cuda_backend

    assert cuda_backend.in_use or device_memory._install_at_first_use in cuda_backend._first_use  # registered
    installs: list[str] = []

    def install() -> None:
        installs.append("install")
        raise RuntimeError("no device here")

    monkeypatch.setattr(device_memory, "install", install)
    monkeypatch.setattr(cuda_backend, "in_use", False)
    monkeypatch.setattr(cuda_backend, "_first_use", [])
    cuda_backend.call_at_first_use(device_memory._install_at_first_use)
    assert installs == []
    array = object()
    assert cuda_backend.adopt(array) is array and cuda_backend.adopt(array) is array
    assert installs == ["install"] and cuda_backend.in_use  # once, and a failure does not stop the engine
    assert "device memory is counted per tensor, not through the CUDA allocator hook (RuntimeError: no device here)" \
        in capsys.readouterr().err
    cuda_backend.call_at_first_use(lambda: installs.append("late"))  # registered after the first use: called at once
    assert installs == ["install", "late"]
