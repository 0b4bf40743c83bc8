"""Planted runs for the Memory and System pages: a leak, an OOM and a healthy run, each with system samples."""
from __future__ import annotations

import gc
import sys
from pathlib import Path

from board_helpers import REPO

for folder in ("tests/instrumentation/memory", "tests/instrumentation"):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

import engine  # noqa: E402
from engine import hooks, memory  # noqa: E402
from fake_pynvml import fake_pynvml  # noqa: E402
from instrumentation import MemoryTracker, SummaryWriter, SystemSampler  # noqa: E402
from training_loops import train, train_with_late_spike  # noqa: E402

OOM_LIMIT_BYTES = 40_000


def write_memory_runs(logdir: Path) -> None:
    """`leaky` (a hook keeps every fc1 output), `oom` (a 40 kB limit), `healthy`; two fake GPUs sampled each step."""
    # Tensors of earlier tests held in reference cycles are live blocks too: freed by a collection in the middle of
    # `leaky`, they drop its live bytes inside every leak window and the trend test (rightly) sees no steady growth.
    gc.collect()
    for name, leak, limit in (("leaky", "hook", None), ("oom", "", OOM_LIMIT_BYTES), ("healthy", "", None)):
        hooks.reset_step(0)
        with SummaryWriter(logdir / name) as writer:
            tracker = MemoryTracker(writer, every=1)  # every step logged: the views below count them
            sampler = SystemSampler(writer, nvml=fake_pynvml(gpus=2), start=False, stall_flush_s=1e9)
            memory.set_limit(limit)
            try:
                train(60, leak, on_step=lambda step: sampler.tick())
            except engine.OutOfMemoryError:
                pass
            finally:
                memory.set_limit(None)
                sampler.close()
                tracker.close()
    hooks.reset_step(0)


def write_late_peak_runs(logdir: Path) -> dict[str, int]:
    """`late` (no stacks) and `late-stacks`: 40 steps whose highest peak is a 1 MiB spike after step 30, inside the
    tracker's default 30 s between peak snapshots; run → the step the spike was allocated in."""
    spikes = {}
    gc.collect()  # tensors of earlier tests held in reference cycles: not live blocks of these runs
    for name, stacks in (("late", False), ("late-stacks", True)):
        hooks.reset_step(0)
        spikes[name] = train_with_late_spike(logdir / name, 40, spike_at=30, stacks=stacks)
    hooks.reset_step(0)
    return spikes
