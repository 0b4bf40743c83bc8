"""The System page's data: `sys/` scalars grouped into host and per-GPU charts (no Dash here)."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from board.data.downsample import DEFAULT_POINTS, envelope_indices
from board.data.store import LogdirStore, UnknownSeries
from board.data.views import XAxis, x_values

_GPU_TAG = re.compile(r"^sys/gpu(\d+)/(.+)$")
HOST_METRICS = ("cpu_percent", "rss_bytes")
GPU_METRICS = ("mem_used_bytes", "mem_total_bytes", "process_mem_bytes", "util_percent", "power_w", "temperature_c")
# Charts: title → metrics drawn together (the GPU memory chart holds used, total and this process's share).
GPU_CHARTS = (("memory", ("mem_used_bytes", "mem_total_bytes", "process_mem_bytes")), ("utilisation", ("util_percent",)),
              ("power", ("power_w",)), ("temperature", ("temperature_c",)))


@dataclass(frozen=True, slots=True)
class SystemSeries:
    tag: str
    x: np.ndarray
    y: np.ndarray


def system_runs(store: LogdirStore) -> list[str]:
    return [run for run, tags in store.all_scalar_tags().items() if any(t.startswith("sys/") for t in tags)]


def gpus(store: LogdirStore, run: str) -> list[int]:
    try:
        tags = store.scalar_tags(run)
    except UnknownSeries:
        return []
    return sorted({int(m.group(1)) for t in tags if (m := _GPU_TAG.match(t))})


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
