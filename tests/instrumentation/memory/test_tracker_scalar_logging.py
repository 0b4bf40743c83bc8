"""The tracker's per-step mem/ scalars: one add_scalar_dict per step, or add_scalar per tag for writers without it
(third-party writers get them at close or within batch_steps steps)."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks
from instrumentation.memory import MemoryTracker


class ScalarOnlyWriter:
    """A writer with only add_scalar (and the run directory the tracker needs)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.calls: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int, walltime: float | None = None) -> None:
        self.calls.append((tag, value, step))

    def flush(self) -> None:
        pass


class DictWriter(ScalarOnlyWriter):
    def __init__(self, log_dir: str) -> None:
        super().__init__(log_dir)
        self.dict_calls = 0

    def add_scalar_dict(self, scalars: dict, step: int, walltime: float | None = None) -> None:
        self.dict_calls += 1
        self.calls.extend((tag, value, step) for tag, value in scalars.items())


def _two_steps(writer) -> MemoryTracker:
    hooks.reset_step(0)
    tracker = MemoryTracker(writer, stacks=False, leak=None, peak_snapshots=False, host_every_steps=1,
                            batch_steps=1)
    try:
        kept = []
        for _ in range(2):
            hooks.mark_step_begin()
            kept.append(engine.tensor(np.zeros(256, dtype=np.float32)))
            hooks.mark_step_end()
    finally:
        tracker.close()
    return tracker


def test_dict_and_per_tag_writers_receive_the_same_scalars(tmp_path):
    plain, batched = ScalarOnlyWriter(str(tmp_path / "a")), DictWriter(str(tmp_path / "b"))
    _two_steps(plain)
    _two_steps(batched)
    assert batched.dict_calls == 2
    tags = lambda calls: [(tag, step) for tag, _, step in calls]  # noqa: E731
    assert tags(plain.calls) == tags(batched.calls)
    assert {"mem/cpu/allocated_bytes", "mem/cpu/peak_bytes", "mem/cpu/live_tensors", "mem/host/rss_bytes"} <= {
        tag for tag, _, _ in plain.calls}
    values = {(tag, step): value for tag, value, step in plain.calls}
    assert values[("mem/cpu/allocated_bytes", 1)] - values[("mem/cpu/allocated_bytes", 0)] == 1024
    assert values[("mem/cpu/live_tensors", 1)] - values[("mem/cpu/live_tensors", 0)] == 1
    assert values[("mem/host/rss_bytes", 0)] > 0
