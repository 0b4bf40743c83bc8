"""The System page's data: `sys/` scalars grouped into host and per-GPU charts (no Dash here)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.downsample import DEFAULT_POINTS, envelope_indices
from board.data.store import LogdirStore, UnknownSeries
from board.data.views import XAxis, x_values
from instrumentation.format.system_status import GpuStatus, read_gpu_status
from instrumentation.format.tags import (ALLOCATED_BYTES, MEM_TOTAL_BYTES, MEM_USED_BYTES, MEMORY, POWER_W,
                                         PROCESS_MEM_BYTES, RESERVED_BYTES, SYSTEM, TEMPERATURE_C, UTIL_PERCENT,
                                         gpu_of, memory_device, memory_tag)

# Charts: title → metrics drawn together (the GPU memory chart holds used, total and this process's share).
GPU_CHARTS = (("memory", (MEM_USED_BYTES, MEM_TOTAL_BYTES, PROCESS_MEM_BYTES)), ("utilisation", (UTIL_PERCENT,)),
              ("power", (POWER_W,)), ("temperature", (TEMPERATURE_C,)))


@dataclass(frozen=True, slots=True)
class SystemSeries:
    tag: str
    x: np.ndarray
    y: np.ndarray


def system_runs(store: LogdirStore) -> list[str]:
    return [run for run, tags in store.all_scalar_tags().items() if any(t.startswith(SYSTEM) for t in tags)]


def gpus(store: LogdirStore, run: str) -> list[int]:
    """GPU indices with NVML samples (``sys/gpu<i>/``) or engine device memory (``mem/cuda:<i>/``)."""
    try:
        tags = store.scalar_tags(run)
    except UnknownSeries:
        return []
    return sorted({found[0] for t in tags if (found := gpu_of(t))} | set(engine_gpus(tags)))


def engine_gpus(tags: list[str]) -> list[int]:
    """Indices of the CUDA devices the engine's allocator logged (``mem/cuda:<i>/…``)."""
    found = set()
    for tag in tags:
        if tag.startswith(MEMORY) and (device := memory_device(tag)) and device.startswith("cuda:") \
                and device[5:].isdigit():
            found.add(int(device[5:]))
    return sorted(found)


def engine_memory_tags(index: int) -> list[str]:
    """The engine's own figures for GPU ``index``, drawn beside NVML's memory: allocated and reserved bytes."""
    return [memory_tag(f"cuda:{index}", ALLOCATED_BYTES), memory_tag(f"cuda:{index}", RESERVED_BYTES)]


def gpu_status(store: LogdirStore, run: str) -> GpuStatus | None:
    """What the run's sampler found of NVML (``plugins/system/gpu_status.json``); None when it wrote nothing."""
    run_dir = store.logdir / run if run != "." else store.logdir
    return read_gpu_status(run_dir, root=store.logdir)


def nvml_note(status: GpuStatus | None) -> str | None:
    """The System page's note when the run has no NVML metrics, saying why; None when NVML was read."""
    if status is None or status.nvml:
        return None
    return (f"NVML is absent for this run, so there are no GPU utilisation, power or temperature charts: "
            f"{status.reason.removeprefix('no GPU metrics: ')}. "
            "GPU memory charts show the engine's own device memory only.")


def series(store: LogdirStore, run: str, tag: str, x_axis: XAxis, points: int = DEFAULT_POINTS) -> SystemSeries | None:
    """One `sys/` series on the step, relative-time or wall-time axis, downsampled for display; None if absent."""
    try:
        columns, _ = store.scalars(run, tag)
    except UnknownSeries:
        return None
    x = x_values(columns, x_axis).astype(np.float64)
    finite = np.isfinite(columns.values)
    x, y = x[finite], columns.values[finite]
    if x_axis != "step":  # time axes: sort (steps are sorted, times nearly so)
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    keep = envelope_indices(x, y, points)
    return SystemSeries(tag, x[keep], y[keep])
