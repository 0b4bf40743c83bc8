"""``engine.cuda`` device memory: limit, growth, statistics (TensorFlow's and PyTorch's names where they exist)."""
from __future__ import annotations

from typing import Any

from engine import memory
from engine.backend.cuda import memory as device_memory


def _device_id(device: int | str | None) -> int:
    """A device index from ``0``, ``"cuda"``, ``"cuda:1"`` or None (the current device)."""
    if device is None or device == "cuda":
        from engine.backend.cuda_backend import require_cupy
        return int(require_cupy().cuda.runtime.getDevice())
    if isinstance(device, bool) or not isinstance(device, (int, str)):
        raise TypeError(f"device must be an index, 'cuda' or 'cuda:<index>', got {device!r}")
    if isinstance(device, str):
        name, _, index = device.partition(":")
        if name != "cuda" or not index.isdigit():
            raise ValueError(f"device must be 'cuda' or 'cuda:<index>', got {device!r}")
        return int(index)
    if device < 0:
        raise ValueError(f"device index must be >= 0, got {device}")
    return device


def set_memory_limit(limit_bytes: int | None, device: int | str | None = None) -> None:
    """Cap the bytes the engine may hold on a CUDA device (None removes the cap): a request past it raises
    ``engine.OutOfMemoryError`` after the memory tracker's OOM capture, and the pool never reserves more."""
    pool = device_memory.pool_of(_device_id(device))
    memory.set_limit(limit_bytes, pool.device)
    pool.set_limit(limit_bytes)


def set_memory_growth(enabled: bool, device: int | str | None = None) -> None:
    """``True`` (the default): the pool reserves device memory on demand. ``False``: it reserves up front — the
    limit if one is set, else most of the device's free memory — and serves every request from that."""
    device_memory.pool_of(_device_id(device)).set_growth(enabled)


def memory_stats(device: int | str | None = None, request_bytes: int | None = None) -> dict[str, Any]:
    """``allocated_bytes``, ``reserved_bytes``, ``peak_bytes``, ``limit_bytes``, ``fragmentation_bytes`` (free bytes
    the pool holds in chunks too small for a request of ``request_bytes``, by default the last request's size),
    ``largest_free_block`` and ``live_tensors`` of a CUDA device."""
    pool = device_memory.pool_of(_device_id(device))
    stats = pool.stats(request_bytes)
    return {"allocated_bytes": stats.allocated_bytes, "reserved_bytes": stats.reserved_bytes,
            "peak_bytes": stats.peak_bytes, "limit_bytes": stats.limit_bytes, "request_bytes": stats.request_bytes,
            "fragmentation_bytes": stats.fragmentation_bytes, "largest_free_block": stats.largest_free_block,
            "live_tensors": memory.live_tensors(pool.device), "growth": stats.growth}


def reset_peak_memory_stats(device: int | str | None = None) -> None:
    pool = device_memory.pool_of(_device_id(device))
    pool.reset_peak()
    memory.reset_peak(pool.device)
