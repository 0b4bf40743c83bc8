"""``engine.cuda``: is a CUDA device usable here, how many, which is current; wait for queued work."""
from __future__ import annotations

from engine.backend import cuda_backend as _cuda
from engine.cuda.memory import memory_stats, reset_peak_memory_stats, set_memory_growth, set_memory_limit
from engine.cuda.profiling import kernel_timer


def is_available() -> bool:
    """True when CuPy imports and at least one CUDA device answers (``unavailable_reason()`` says why not)."""
    return _cuda.is_available()


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used here (CuPy missing, no device, driver too old), or None when it can."""
    return _cuda.unavailable_reason()


def device_count() -> int:
    """Visible CUDA devices (0 when CUDA is unavailable)."""
    return _cuda.device_count()


def current_device() -> int:
    """Index of the current CUDA device; a RuntimeError saying why when CUDA is unavailable."""
    return _cuda.current_device()


def set_device(index: int) -> None:
    """Make CUDA device ``index`` current (where ``"cuda"`` without an index places data)."""
    _cuda.set_device(_cuda.check_index(int(index)))


def synchronize(device: int | None = None) -> None:
    """Block until every kernel and copy queued on ``device`` (the current one by default) has finished."""
    _cuda.synchronize(device)


__all__ = ["current_device", "device_count", "is_available", "kernel_timer", "memory_stats", "reset_peak_memory_stats",
           "set_device", "set_memory_growth", "set_memory_limit", "synchronize", "unavailable_reason"]
