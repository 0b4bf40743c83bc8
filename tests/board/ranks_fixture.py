"""Rank groups written with the instrumentation's SummaryWriter and AlertWriter, laid out as data-parallel training
writes them."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from board.data.ranks import ALLREDUCE_MS, ALLREDUCE_WAIT_MS, COMM_BYTES, PARAM_CHECKSUM
from instrumentation import SummaryWriter
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.format.tags import CPU_WAIT_MS, DATA_TIME_MS, STEP_TIME_MS

WALL_TIME0 = 1.7e9


def write_rank(run_dir: Path, tags: Mapping[str, Mapping[int, float]]) -> None:
    """One rank's run: `tags` maps a tag to {step: value}; points are written step by step, as training does."""
    steps = sorted({step for points in tags.values() for step in points})
    with SummaryWriter(run_dir) as writer:
        for step in steps:
            for tag, points in tags.items():
                if step in points:
                    writer.add_scalar(tag, float(points[step]), step, walltime=WALL_TIME0 + step)


def rank_tags(step_ms: np.ndarray, data_ms: np.ndarray | None = None, wait_ms: np.ndarray | None = None,
              allreduce_ms: np.ndarray | None = None, comm_bytes: np.ndarray | None = None,
              cpu_wait_ms: np.ndarray | None = None, first_step: int = 0) -> dict[str, dict[int, float]]:
    """Per-step tags of one rank from arrays over consecutive steps (NaN in an array: that step is not logged)."""
    tags = {}
    for tag, values in ((STEP_TIME_MS, step_ms), (DATA_TIME_MS, data_ms), (ALLREDUCE_WAIT_MS, wait_ms),
                        (ALLREDUCE_MS, allreduce_ms), (COMM_BYTES, comm_bytes), (CPU_WAIT_MS, cpu_wait_ms)):
        if values is not None:
            tags[tag] = {first_step + i: float(v) for i, v in enumerate(values) if not np.isnan(v)}
    return tags


def checksum_tags(checksums: Mapping[int, float]) -> dict[str, dict[int, float]]:
    return {PARAM_CHECKSUM: dict(checksums)}


def plant_alert(run_dir: Path, kind: str, subject_rank: int, step: int, message: str, **evidence: object) -> None:
    AlertWriter(run_dir).write(Alert(kind, "warning", f"rank{subject_rank}", message, step,
                                     wall_time=WALL_TIME0 + step, evidence=dict(evidence)))


def write_straggler_group(logdir: Path, group: str = "ddp", ranks: int = 4, steps: int = 40, slow_rank: int = 2,
                          seed: int = 0) -> dict[int, np.ndarray]:
    """`ranks` ranks busy ~61 ms a step, rank `slow_rank` ~30 % busier (the others wait ~13 ms for it in AllReduce, so
    its step is still the longest), every rank waiting 20-21 ms a step for a CPU (more ranks than cores), checksums
    every 10 steps that agree, and the straggler alert the instrumentation would raise. Returns each rank's step
    times."""
    rng = np.random.default_rng(seed)
    times = {}
    for rank in range(ranks):
        data_ms = 5.0 + rng.uniform(0, 1, steps)
        busy = 60.0 * (1.3 if rank == slow_rank else 1.0) + rng.uniform(0, 2, steps)
        wait_ms = 0.5 + rng.uniform(0, 1, steps) if rank == slow_rank else 12.0 + rng.uniform(0, 2, steps)
        cpu_wait_ms = 20.0 + rng.uniform(0, 1, steps)
        step_ms = data_ms + busy + wait_ms + cpu_wait_ms
        times[rank] = step_ms
        tags = rank_tags(step_ms, data_ms, wait_ms, 25.0 + rng.uniform(0, 1, steps), np.full(steps, 4 << 20),
                         cpu_wait_ms)
        tags.update(checksum_tags({step: 1234567.0 + step for step in range(0, steps, 10)}))
        write_rank(logdir / group / f"rank{rank}", tags)
    # the alert as instrumentation/distributed/straggler.py words it (its evidence keys: instrumentation/format)
    plant_alert(logdir / group / f"rank{slow_rank}", "straggler", slow_rank, 19,
                f"rank{slow_rank} is slower than the other ranks: its busy time (step - allreduce, data and CPU "
                "waits) was >= 1.15x their median on 20 of steps 0-19; median 78.00 ms vs 60.00 ms (1.30x)",
                rank=slow_rank, world_size=ranks, window_steps=[0, 19], busy_ms=78.0, others_busy_ms=60.0, ratio=1.3,
                margin=0.15, min_steps=16, steps_over=20)
    return times
