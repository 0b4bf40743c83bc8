"""Fixtures for the memory tracker's tests: a fresh step counter, no allocator limit, trackers always closed."""
from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine import hooks, memory
from instrumentation import SummaryWriter
from instrumentation.memory import MemoryTracker


@pytest.fixture(autouse=True)
def no_garbage_of_earlier_tests() -> None:
    """Collect the cyclic garbage of earlier tests before each one. NOTE: e.g. test_oom.py's OutOfMemoryError
    tracebacks keep their frames' tensors (32 MiB) alive in a reference cycle; the cycle collector used to free them
    in the middle of the next test, whose step peak then read 32 MiB (test_tracker_budget.py failed right after
    test_oom.py in one session). The tracker's tests measure the allocator's bytes: none may be an earlier test's."""
    gc.collect()


@pytest.fixture()
def make_tracker(tmp_path: Path) -> Iterator[Callable[..., MemoryTracker]]:
    """``make_tracker(**options)`` → a tracker writing to ``tmp_path / "run"``; closed (and its writer) afterwards."""
    made: list[tuple[MemoryTracker, SummaryWriter]] = []
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
