"""Device-side time in a trace: the GPU stream lanes, the op → kernel flows and GPU busy time (writer and board)."""
from __future__ import annotations

import numpy as np

# One lane (``tid``) per CUDA stream: GPU_TID_BASE + the stream's order of appearance in the capture.
GPU_TID_BASE = 1000
# Flow events from an op to its kernels, as torch.profiler writes them: "ph": "s" on the op's lane at its start,
# "ph": "f" with "bp": "e" on the stream's lane at the kernel's start, both with this category and name and one id.
FLOW_CAT = FLOW_NAME = "ac2g"
ARG_STREAM = "stream"  # kernel events: the CUDA stream's handle


def busy_us(starts_us: np.ndarray, ends_us: np.ndarray, window_start_us: float = -np.inf,
            window_end_us: float = np.inf) -> float:
    """Length of the union of the intervals clipped to the window: the time at least one kernel ran in it."""
    starts = np.maximum(np.asarray(starts_us, dtype=np.float64), window_start_us)
    ends = np.minimum(np.asarray(ends_us, dtype=np.float64), window_end_us)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return 0.0
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    # a new run starts where an interval begins after every earlier one ended
    new_run = np.concatenate(([True], starts[1:] > ends[:-1]))
    run_starts = starts[new_run]
    run_ends = ends[np.concatenate((np.flatnonzero(new_run)[1:] - 1, [len(ends) - 1]))]
    return float((run_ends - run_starts).sum())
