"""Device memory through ``engine.memory``: a CuPy allocator hook over one memory pool per device.

The pure accounting (request rounding, limit decisions, fragmentation from free-chunk sizes, the reserve of a
non-growing pool, device out-of-memory errors) is plain functions on plain numbers, tested on the CPU; ``DevicePool``
is the CuPy glue (``tests/gpu/test_memory_gpu.py``). Every buffer CuPy asks for goes through ``DevicePool.malloc``:
the engine's limit is checked first (``engine.memory.check_device_room``), the pool is asked, a device refusal
becomes ``engine.OutOfMemoryError``, and the block is registered with ``engine.memory.register_block``; the pointer
handed to CuPy owns a small object whose death (the array's memory freed) calls ``release_block``. The hook is
installed when the engine first puts an array on a CUDA device (``cuda_backend.call_at_first_use``, registered when
this module is imported: ``engine.cuda`` imports it), so the engine's device buffers go through it from the first.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from engine import memory
from engine.backend import cuda_backend

ALLOCATION_UNIT_BYTES = 512  # CuPy's pool rounds every request up to this (cudaMalloc's alignment)
CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation
UP_FRONT_SHARE = 0.9  # without growth and without a limit: the share of the device's free memory reserved up front


def round_request(nbytes: int) -> int:
    """The bytes the pool hands out for a request of ``nbytes`` (a multiple of ``ALLOCATION_UNIT_BYTES``)."""
    if nbytes < 0:
        raise ValueError(f"a device request must be >= 0 bytes, got {nbytes}")
    return -(-nbytes // ALLOCATION_UNIT_BYTES) * ALLOCATION_UNIT_BYTES


def exceeds_limit(request_bytes: int, allocated_bytes: int, limit_bytes: int | None) -> bool:
    """Whether handing out ``request_bytes`` more would pass the limit (never without one)."""
    return limit_bytes is not None and allocated_bytes + request_bytes > limit_bytes


def fragmentation_bytes(free_chunk_bytes: Sequence[int], request_bytes: int) -> int:
    """Free bytes the pool holds in chunks too small for a request of ``request_bytes``: reserved, yet unusable by
    it (a request the pool cannot serve from its chunks makes it reserve more from the device)."""
    return sum(chunk for chunk in free_chunk_bytes if chunk < request_bytes)


def largest_free_block(free_chunk_bytes: Sequence[int]) -> int:
    return max(free_chunk_bytes, default=0)


def up_front_reserve_bytes(growth: bool, limit_bytes: int | None, reserved_bytes: int, free_device_bytes: int) -> int:
    """How many bytes to reserve now: none with growth (the pool grows on demand); without growth the limit (or
    ``UP_FRONT_SHARE`` of the device's free memory) minus what is reserved already, as TensorFlow does without
    ``set_memory_growth``."""
    if growth:
        return 0
    target = limit_bytes if limit_bytes is not None else int(free_device_bytes * UP_FRONT_SHARE)
    return max(target - reserved_bytes, 0) // ALLOCATION_UNIT_BYTES * ALLOCATION_UNIT_BYTES


def device_oom_reason(error: BaseException) -> str | None:
    """The reason to report when ``error`` is the device refusing memory — CuPy's pool ``OutOfMemoryError`` (a
    ``MemoryError``) or a CUDA runtime error with status ``cudaErrorMemoryAllocation`` — else None."""
    if isinstance(error, memory.OutOfMemoryError):
        return None  # the engine's own: already announced
    if isinstance(error, MemoryError) or getattr(error, "status", None) == CUDA_ERROR_MEMORY_ALLOCATION:
        return f"{type(error).__name__}: {error}"
    return None


class _Held:
    """Owns the pool's pointer for the pointer handed to CuPy; its death is the buffer's free."""

    __slots__ = ("pointer", "key")

    def __init__(self, pointer: Any, key: int) -> None:
        self.pointer, self.key = pointer, key

    def __del__(self) -> None:
        try:
            memory.release_block(self.key)
        except Exception:  # noqa: BLE001 - at interpreter exit the module may be gone; never raise from __del__
            pass


class DevicePool:
    """One CuPy ``SingleDeviceMemoryPool`` for device ``device_id`` behind the engine's accounting."""

    def __init__(self, cupy: Any, device_id: int) -> None:
        self.cupy, self.device_id, self.device = cupy, device_id, f"cuda:{device_id}"
        with cupy.cuda.Device(device_id):
            self.pool = cupy.cuda.memory.SingleDeviceMemoryPool()
        self.growth = True
        self.request_bytes = 0  # the last request's rounded size (fragmentation is measured against it)
        self.peak_bytes = 0
        self._reserve: Any = None  # the up-front reservation while it is held as one block (growth off)

    def malloc(self, nbytes: int) -> Any:
        cupy = self.cupy
        rounded = round_request(nbytes)
        self.request_bytes = rounded
        memory.check_device_room(self.device, rounded)
        try:
            pointer = self.pool.malloc(nbytes)
        except Exception as error:  # noqa: BLE001 - translated when it is the device refusing memory
            reason = device_oom_reason(error)
            if reason is None:
                raise
            raise memory.refused_by_device(rounded, self.device, reason) from error
        size = pointer.mem.size
        if not size:  # a zero-size request: no device memory, nothing to account for
            return pointer
        key = memory.register_block(pointer.ptr, size, self.device)
        used = self.pool.used_bytes()
        if used > self.peak_bytes:
            self.peak_bytes = used
        owned = cupy.cuda.memory.UnownedMemory(pointer.ptr, size, _Held(pointer, key), self.device_id)
        return cupy.cuda.memory.MemoryPointer(owned, 0)

    def set_limit(self, limit_bytes: int | None) -> None:
        self.pool.set_limit(size=0 if limit_bytes is None else limit_bytes)  # 0: no limit (CuPy's convention)
        self._apply_growth()

    def set_growth(self, growth: bool) -> None:
        self.growth = bool(growth)
        self._apply_growth()

    def _apply_growth(self) -> None:
        """Without growth, reserve up front: one block as large as the limit (or most of the device) is taken and
        given back to the pool, which keeps it as a free chunk and splits it for later requests."""
        free_device = self.cupy.cuda.runtime.memGetInfo()[0] if not self.growth else 0
        extra = up_front_reserve_bytes(self.growth, memory.stats(self.device).limit_bytes, self.pool.total_bytes(),
                                       free_device)
        if extra:
            with self.cupy.cuda.Device(self.device_id):
                block = self.pool.malloc(extra)
            del block  # back to the pool as a free chunk: reserved, not allocated

    def free_chunk_bytes(self) -> tuple[int, ...] | None:
        """Sizes of the free chunks of the current stream's arena (CuPy ≥ 14's debug accessor; None before)."""
        read = getattr(self.pool, "_debug_arena_get_index", None)
        if read is None:
            return None
        stream = self.cupy.cuda.get_current_stream().ptr
        return tuple(int(size) for size, _chunk in read(stream))

    def stats(self, request_bytes: int | None = None) -> memory.PoolStats:
        request = self.request_bytes if request_bytes is None else round_request(request_bytes)
        chunks = self.free_chunk_bytes()
        return memory.PoolStats(
            self.device, int(self.pool.used_bytes()), int(self.pool.total_bytes()), self.peak_bytes,
            memory.stats(self.device).limit_bytes, request, chunks,
            None if chunks is None else fragmentation_bytes(chunks, request),
            None if chunks is None else largest_free_block(chunks), self.growth)

    def reset_peak(self) -> None:
        self.peak_bytes = int(self.pool.used_bytes())


_pools: dict[int, DevicePool] = {}
_lock = threading.Lock()


def pool_of(device_id: int) -> DevicePool:
    """The pool of ``device_id``, installing the allocator hook on first use."""
    pool = _pools.get(device_id)
    if pool is not None:
        return pool
    cupy = cuda_backend.require_cupy()
    with _lock:
        pool = _pools.get(device_id)
        if pool is None:
            pool = _pools[device_id] = DevicePool(cupy, device_id)
            memory.attach_pool(pool.device, pool.stats)
            cupy.cuda.set_allocator(_malloc)
    return pool


def install() -> None:
    """Route every CuPy allocation of the current device through the engine (idempotent)."""
    pool_of(cuda_backend.require_cupy().cuda.runtime.getDevice())


def _install_at_first_use() -> None:
    """``install``; a failure is reported on stderr and device buffers are then counted per tensor, as host buffers
    are."""
    try:
        install()
    except Exception as error:  # noqa: BLE001 - accounting goes on without the pool
        print(f"flowscope.engine: device memory is counted per tensor, not through the CUDA allocator hook "
              f"({type(error).__name__}: {error})", file=sys.stderr)


cuda_backend.call_at_first_use(_install_at_first_use)


def _malloc(nbytes: int) -> Any:
    """The allocator CuPy calls (``cupy.cuda.set_allocator``): the pool of the current device."""
    device_id = _pools_device()
    pool = _pools.get(device_id)
    return (pool or pool_of(device_id)).malloc(nbytes)


def _pools_device() -> int:
    return cuda_backend.cupy.cuda.runtime.getDevice()
