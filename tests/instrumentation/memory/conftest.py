"""Fixtures for the memory tracker's tests: a fresh step counter, no allocator limit, trackers always closed."""
from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine import hooks, memory
from instrumentation import SummaryWriter
from instrumentation.memory import MemoryTracker


@pytest.fixture()
def make_tracker(tmp_path: Path) -> Iterator[Callable[..., MemoryTracker]]:
    """``make_tracker(**options)`` → a tracker writing to ``tmp_path / "run"``; closed (and its writer) afterwards."""
    made: list[tuple[MemoryTracker, SummaryWriter]] = []
    gc.collect()  # tensors of an earlier test (held by a traceback cycle) must not be freed inside this one
    hooks.reset_step(0)

    def make(**options: object) -> MemoryTracker:
        writer = SummaryWriter(tmp_path / "run")
        tracker = MemoryTracker(writer, **options)
        made.append((tracker, writer))
        return tracker

    yield make
    for tracker, writer in made:
        tracker.close()
        writer.close()
    memory.set_limit(None)
    hooks.reset_step(0)
