"""``engine.cuda`` GPU time: the kernel timer the profiler records each op's device time with."""
from __future__ import annotations

from engine.backend.cuda.timing import KernelTimer, timer


def kernel_timer() -> KernelTimer | None:
    """A CUDA-event timer of each op's kernels (a recorder; see engine/backend/cuda/timing.py), or None without
    CuPy or a device."""
    return timer()
