"""The allocator's hook points follow the engine's one rule (``engine.hooks.emit``), for CPU buffers and device pool
blocks alike: a ``PropagatingError`` goes through, any other recorder failure is reported once and the allocation goes
on; pool blocks reach ``buffer_history`` as CPU buffers do. And a ``Block`` handed out never changes, not even when a
tensor claims a pool block."""
from __future__ import annotations

import gc
from collections import deque
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

from engine import hooks, memory
from engine.memory_recording import HistoryRing

DEVICE = "cuda:6"  # a device name the allocator accounts for; no device is touched
POINTER = 0x7D00_0000_0000


class Stop(hooks.PropagatingError):
    """Raised on purpose by a recorder: must stop the allocation or the free."""


class DeviceArray:
    """Shaped as a CuPy array of a pool block: ``data.mem.ptr`` is the block's pointer."""

    base = None

    def __init__(self, pointer: int, shape: tuple[int, ...], dtype: str) -> None:
        self.data = SimpleNamespace(mem=SimpleNamespace(ptr=pointer))
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * self.dtype.itemsize


@pytest.fixture()
def device() -> Iterator[str]:
    gc.collect()
    yield DEVICE
    for key, _, on, _, _ in memory.live_buffers():
        if on == DEVICE:
            memory.release_block(key)
    memory._devices.pop(DEVICE, None)  # NOTE: later trackers must not see a device this test made up


@pytest.fixture()
def attach() -> Iterator:
    added: list = []

    def add(recorder):
        added.append(hooks.add_recorder(recorder))
        return recorder

    yield add
    for recorder in added:
        hooks.remove_recorder(recorder)


class Raising:
    """A recorder whose ``method`` raises ``error`` (the others are absent)."""

    def __init__(self, method: str, error: type[Exception]) -> None:
        def fail(*args) -> None:
            raise error(f"{method} failed on purpose")

        setattr(self, method, fail)


def _cpu_alloc() -> int:
    return memory.register(np.ones(256, np.float32), "activation", "Test")


def _block_alloc() -> int:
    return memory.register_block(POINTER, 4096, DEVICE, op="Test")


@pytest.mark.parametrize("method", ["buffer_alloc", "buffer_history"])
@pytest.mark.parametrize("allocate", [_cpu_alloc, _block_alloc], ids=["register", "register_block"])
def test_a_propagating_error_at_an_allocation_goes_through_and_nothing_stays_counted(device, attach, method, allocate):
    before = (memory.allocated_bytes("cpu"), memory.allocated_bytes(device), memory.buffer_count())
    attach(Raising(method, Stop))
    with pytest.raises(Stop, match=f"{method} failed on purpose"):
        allocate()
    # the caller got no key to release it with: the allocator released it
    assert (memory.allocated_bytes("cpu"), memory.allocated_bytes(device), memory.buffer_count()) == before


@pytest.mark.parametrize("method", ["buffer_free", "buffer_history"])
@pytest.mark.parametrize("kind", ["release", "release_block"])
def test_a_propagating_error_at_a_free_goes_through_after_the_free(device, attach, method, kind):
    key, on, nbytes = (_cpu_alloc(), "cpu", 1024) if kind == "release" else (_block_alloc(), device, 4096)
    before = (memory.allocated_bytes(on), memory.buffer_count())
    attach(Raising(method, Stop))
    with pytest.raises(Stop, match=f"{method} failed on purpose"):
        getattr(memory, kind)(key)
    assert (memory.allocated_bytes(on), memory.buffer_count()) == (before[0] - nbytes, before[1] - 1)  # freed


class Failing:
    """Every allocator method raises (not a PropagatingError) and counts its calls."""

    def __init__(self) -> None:
        self.calls = {"buffer_alloc": 0, "buffer_free": 0, "buffer_history": 0}

    def _fail(self, method: str) -> None:
        self.calls[method] += 1
        raise ValueError(f"{method} broke")

    def buffer_alloc(self, *args) -> None:
        self._fail("buffer_alloc")

    def buffer_free(self, *args) -> None:
        self._fail("buffer_free")

    def buffer_history(self, record) -> None:
        self._fail("buffer_history")


def test_a_failing_recorder_is_reported_once_and_allocations_go_on(device, attach, capsys):
    failing = attach(Failing())
    before = (memory.allocated_bytes("cpu"), memory.allocated_bytes(device), memory.buffer_count())
    for round_ in range(3):
        cpu_key, block_key = _cpu_alloc(), _block_alloc()
        assert memory.allocated_bytes(device) == before[1] + 4096
        memory.release(cpu_key)
        memory.release_block(block_key)
    assert (memory.allocated_bytes("cpu"), memory.allocated_bytes(device), memory.buffer_count()) == before
    # still called every time: 3 rounds of a CPU buffer and a pool block, each allocated and freed
    assert failing.calls == {"buffer_alloc": 6, "buffer_free": 6, "buffer_history": 12}
    err = capsys.readouterr().err
    for method in ("buffer_alloc", "buffer_free", "buffer_history"):
        assert err.count(f"Failing.{method} failed") == 1, err


def test_pool_blocks_reach_the_history_as_cpu_buffers_do(device, attach):
    ring: deque = deque()
    attach(HistoryRing(ring))
    hooks.reset_step(5)
    try:
        key = memory.register_block(POINTER, 8192, device, op="MatMul")
        memory.release_block(key)
        cpu = memory.register(np.ones(2, np.float64), "activation", "Add")
        memory.release(cpu)
    finally:
        hooks.reset_step(0)
    assert [record[1:] for record in ring] == [("alloc", 8192, "MatMul", 5, device),
                                               ("free", 8192, "MatMul", 5, device),
                                               ("alloc", 16, "Add", 5, "cpu"), ("free", 16, "Add", 5, "cpu")]
    assert all(isinstance(record[0], int) for record in ring)


def test_a_block_handed_out_before_a_claim_is_unchanged_after_it(device):
    key = memory.register_block(POINTER, 4096, device)
    record = memory.live_set()
    groups_before = memory.live_groups(record)
    [block] = memory.live_set_blocks(record, device)
    fields = (block.bytes, block.category, block.op, block.shape, block.dtype)
    assert fields == (4096, "temporary", "", (4096,), "uint8")

    claimed = memory.register(DeviceArray(POINTER, (32, 32), "float32"), "parameter", "Linear")

    assert claimed == key
    [now] = memory.live_blocks(device)
    assert (now.category, now.op, now.shape, now.dtype, now.bytes) == ("parameter", "Linear", (32, 32), "float32", 4096)
    assert memory.category_bytes(device) == {"temporary": 0, "parameter": 4096}
    # what was handed out before says what it said
    assert (block.bytes, block.category, block.op, block.shape, block.dtype) == fields
    assert [(b.category, b.op, b.shape) for b in memory.live_set_blocks(record, device)] == [("temporary", "", (4096,))]
    assert memory.live_groups(record) == groups_before
    assert memory.live_tensors(device) == 1
    memory.release(claimed)
    assert memory.allocated_bytes(device) == 4096 and memory.live_tensors(device) == 0  # the pointer still holds it


def test_a_pool_block_whose_pointer_dies_takes_its_tensors_off_the_count(device):
    key = memory.register_block(POINTER, 2048, device)
    array = DeviceArray(POINTER, (512,), "float32")
    assert memory.register(array, "activation", "Relu") == memory.register(array, "activation", "Relu") == key
    assert (memory.live_tensors(device), memory.stats(device).live_buffers) == (2, 1)
    memory.release_block(key)
    assert (memory.live_tensors(device), memory.stats(device).live_buffers, memory.allocated_bytes(device)) == (0, 0, 0)
    memory.release(key)  # the tensors' own releases find no block
    assert memory.live_tensors(device) == 0


def test_blocks_are_read_only(device):
    memory.register_block(POINTER, 512, device)
    [block] = memory.live_blocks(device)
    for field in ("buffer_id", "bytes", "device", "category", "op", "module", "phase", "step", "shape", "dtype",
                  "site"):
        with pytest.raises(AttributeError):
            setattr(block, field, None)
    with pytest.raises(AttributeError):
        block.extra = 1  # no new attributes either
    assert (block.category, block.bytes) == ("temporary", 512)
