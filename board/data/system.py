"""The System page's data: `sys/` scalars grouped into host and per-GPU charts (no Dash here)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.downsample import DEFAULT_POINTS, envelope_indices
from board.data.store import LogdirStore, UnknownSeries
from board.data.views import XAxis, x_values
from instrumentation.format.tags import (MEM_TOTAL_BYTES, MEM_USED_BYTES, POWER_W, PROCESS_MEM_BYTES, SYSTEM,
                                         TEMPERATURE_C, UTIL_PERCENT, gpu_of)

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
    try:
        tags = store.scalar_tags(run)
    except UnknownSeries:
        return []
    return sorted({found[0] for t in tags if (found := gpu_of(t))})


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
