"""Planted runs with device memory, written through the real writer, tracker and sampler: ``gpu`` (a pooled
``cuda:0`` whose blocks go through engine.memory as the CUDA allocator hook registers them, NVML readings from the
pynvml substitute in tests/instrumentation/fake_pynvml.py, and a fragmented pool) and ``no-nvml`` (NVML absent)."""
from __future__ import annotations

import sys
from pathlib import Path

from board_helpers import REPO

for folder in ("tests/instrumentation",):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

from engine import hooks, memory  # noqa: E402
from fake_pynvml import fake_pynvml  # noqa: E402
from instrumentation import MemoryTracker, SummaryWriter, SystemSampler  # noqa: E402

MiB = 1 << 20
DEVICE = "cuda:0"
STEPS = 12
POINTER = 0x7D00_0000_0000


def write_gpu_runs(logdir: Path) -> None:
    pool = {"reserved": 0, "fragmentation": 0}
    memory.attach_pool(DEVICE, lambda: memory.PoolStats(
        DEVICE, memory.allocated_bytes(DEVICE), pool["reserved"], 0, None, 32 * MiB, (), pool["fragmentation"],
        8 * MiB, True))
    try:
        hooks.reset_step(0)
        with SummaryWriter(logdir / "gpu") as writer:
            tracker = MemoryTracker(writer, stacks=False, every=1, batch_steps=1, host_rss=False, leak=None,
                                    peak_snapshots=False)
            sampler = SystemSampler(writer, nvml=fake_pynvml(gpus=1), start=False, stall_flush_s=1e9)
            parameters = memory.register_block(POINTER, 64 * MiB, DEVICE)
            for step in range(STEPS):
                activation = memory.register_block(POINTER + (step + 1) * (1 << 32), (8 + step) * MiB, DEVICE)
                pool["reserved"] = (128 + 16 * step) * MiB
                pool["fragmentation"] = (4 * step) * MiB if step < STEPS - 2 else 100 * MiB  # fragmented at the end
                sampler.tick()
                memory.release_block(activation)
                hooks.mark_step_end()
            tracker.close()
            sampler.close()
            memory.release_block(parameters)
        hooks.reset_step(0)
        with SummaryWriter(logdir / "no-nvml") as writer:
            sampler = SystemSampler(writer, nvml=fake_pynvml(init_error=True), start=False, stall_flush_s=1e9)
            for _ in range(3):
                sampler.tick()
                hooks.mark_step_end()
            sampler.close()
    finally:
        hooks.reset_step(0)
        memory.detach_pool(DEVICE)
        memory._devices.pop(DEVICE, None)  # NOTE: later tests must not see the device these runs made up
