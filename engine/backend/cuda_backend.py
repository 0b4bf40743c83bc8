"""Optional CuPy backend, imported under a guard; the import error is kept and shown only when a GPU is asked for.

Everything that touches CUDA through CuPy lives here: availability (and why not), device count, the current
device, synchronisation, host<->device copies, and the stream/event accessors the profiler and the prefetch
stage use.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

cupy: Any = None
import_error: Exception | None = None
try:  # pragma: no cover - depends on the machine
    import cupy  # type: ignore[no-redef]
except Exception as error:  # noqa: BLE001 - any failure means "no GPU backend"
    cupy = None
    import_error = error

# NOTE: set once any array is put on a CUDA device; until then ops skip the device check (all data is host data).
in_use = False
_first_use: list[Callable[[], None]] = []  # called once, when in_use is first set (call_at_first_use)


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why the CUDA backend cannot be used here (CuPy missing, no device, driver too old), or None when it can."""
    if cupy is None:
        return (f"CuPy is not installed or failed to import ({type(import_error).__name__}: {import_error}); "
                "install it with pip install 'flowscope[cuda]'")
    runtime = cupy.cuda.runtime
    try:
        count = runtime.getDeviceCount()
    except Exception as error:  # noqa: BLE001 - CUDARuntimeError, or a missing libcuda
        text = f"{type(error).__name__}: {error}"
        if "InsufficientDriver" in text or "insufficient" in text.lower():
            return f"the NVIDIA driver is too old for this CUDA runtime ({_versions()}): {text}"
        if "NoDevice" in text or "no CUDA-capable device" in text:
            return f"no CUDA device is visible ({text})"
        return f"the CUDA runtime could not start ({_versions()}): {text}"
    if count == 0:
        return "no CUDA device is visible (the CUDA runtime reports 0 devices)"
    return None


def _versions() -> str:
    parts = []
    for name, read in (("driver", "driverGetVersion"), ("runtime", "runtimeGetVersion")):
        try:
            version = getattr(cupy.cuda.runtime, read)()
            parts.append(f"{name} supports CUDA {version // 1000}.{version % 1000 // 10}")
        except Exception:  # noqa: BLE001 - a version is a detail of the message
            parts.append(f"{name} version unknown")
    return ", ".join(parts)


def is_available() -> bool:
    return unavailable_reason() is None


def require_cupy() -> Any:
    """The cupy module, or a RuntimeError saying why it did not import (a device is not needed: NVRTC compiles)."""
    if cupy is None:
        raise RuntimeError(f"CUDA is not available: {unavailable_reason()}")
    return cupy


def require_cuda() -> Any:
    """The cupy module when a CUDA device is usable, or a RuntimeError saying why not."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"CUDA is not available: {reason}")
    return cupy


def device_count() -> int:
    return 0 if unavailable_reason() is not None else int(cupy.cuda.runtime.getDeviceCount())


def current_device() -> int:
    return int(require_cuda().cuda.runtime.getDevice())


def set_device(index: int) -> None:
    require_cuda().cuda.runtime.setDevice(int(index))


def synchronize(index: int | None = None) -> None:
    """Wait for all work queued on device ``index`` (the current one by default)."""
    cp = require_cuda()
    if index is None:
        cp.cuda.Device().synchronize()
    else:
        cp.cuda.Device(int(index)).synchronize()


def check_index(index: int) -> int:
    count = device_count() if is_available() else 0
    if not 0 <= index < count:
        raise RuntimeError(f"CUDA device {index} does not exist: {count} CUDA device(s) visible")
    return index


def call_at_first_use(callback: Callable[[], None]) -> None:
    """Call ``callback()`` when the engine first puts an array on a CUDA device, before it allocates there (at once
    when it has already). The allocator hook (``engine.backend.cuda.memory``) installs itself this way: this module,
    below the allocator, never imports it."""
    if in_use:
        callback()
    else:
        _first_use.append(callback)


def _begin_use() -> None:
    global in_use
    in_use = True
    callbacks = list(_first_use)
    _first_use.clear()
    for callback in callbacks:
        callback()


def adopt(array: Any) -> Any:
    """``array`` (a CuPy array the engine did not copy itself) from now on in the engine: ops check devices."""
    if not in_use:
        _begin_use()
    return array


def to_device(array: Any, index: int) -> Any:
    """A copy of ``array`` (numpy or cupy) on CUDA device ``index``; marks the backend in use (before the copy: the
    first device buffer goes through the allocator hook already)."""
    cp = require_cuda()
    check_index(index)
    with cp.cuda.Device(index):
        if not in_use:
            _begin_use()
        return adopt(cp.array(array, copy=True))


def to_host(array: Any) -> Any:
    """A NumPy copy of a cupy array (waits for the copy)."""
    return array.get()


def current_stream() -> Any:
    """The CuPy stream that ops on the current device run on."""
    return require_cuda().cuda.get_current_stream()


def new_stream(non_blocking: bool = True) -> Any:
    return require_cuda().cuda.Stream(non_blocking=non_blocking)


def new_event(timing: bool = True) -> Any:
    """A CUDA event (``record(stream)``, ``synchronize()``; ``cupy.cuda.get_elapsed_time(a, b)`` in ms)."""
    return require_cuda().cuda.Event(disable_timing=not timing)
