"""Ranks as threads for unit tests: a group whose ``all_gather`` is a real exchange between threads (each deposits its
array, waits for the others, gets them all stacked), and synthetic step events with the engine's fields."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from engine import hooks
from engine.hooks import CommEvent, CommWaitEvent

HANG_GUARD_S = 120.0  # a barrier nobody else reaches: the ranks made different collective calls


class ThreadGroup:
    """``world_size`` ranks sharing slots; ``member(rank)`` is what a rank's RankMonitor gets as its group."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.slots: list[Any] = [None] * world_size
        self.barrier = threading.Barrier(world_size, timeout=HANG_GUARD_S)
        self.calls = [0] * world_size

    def member(self, rank: int) -> Member:
        return Member(self, rank)


class Member:
    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group, self._rank = group, rank

    def rank(self) -> int:
        return self._rank

    def world_size(self) -> int:
        return self.group.world_size

    def all_gather(self, array: np.ndarray) -> np.ndarray:
        group = self.group
        group.calls[self._rank] += 1
        group.slots[self._rank] = np.array(array, copy=True)
        group.barrier.wait()
        gathered = np.stack(group.slots)
        group.barrier.wait()  # nobody overwrites a slot before every rank has read them all
        return gathered


def run_ranks(world_size: int, body: Callable[[int, Member], Any]) -> list[Any]:
    """``body(rank, member)`` on one thread per rank; its results by rank (an exception in one is raised here)."""
    group = ThreadGroup(world_size)
    results: list[Any] = [None] * world_size
    errors: list[BaseException] = []

    def run(rank: int) -> None:
        try:
            results[rank] = body(rank, group.member(rank))
        except BaseException as error:  # noqa: BLE001 - re-raised on the test's thread
            errors.append(error)
            group.barrier.abort()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


STEP_NS = 10_000_000  # a synthetic step: 10 ms
T0_NS = 5_000_000_000


def step_start_ns(step: int) -> int:
    return T0_NS + step * 2 * STEP_NS  # steps 10 ms apart: nothing of one step falls in another


def play_step(monitor: Any, step: int, *, step_ms: float = 10.0, data_ms: float = 0.0, wait_ms: float = 0.0,
              comm: tuple[tuple[float, float, int], ...] = ()) -> None:
    """The events the engine sends a recorder for one step: data wait, collectives (``(start_ms, end_ms, nbytes)``
    from the step's start), the bucket wait, and the step's end."""
    start = step_start_ns(step)
    if data_ms:
        monitor.data_wait(hooks.DataWaitEvent(step, int(data_ms * 1e6), start + int(data_ms * 1e6)))
    for bucket, (begin_ms, end_ms, nbytes) in enumerate(comm):
        monitor.communication(CommEvent("allreduce", bucket, nbytes, start + int(begin_ms * 1e6),
                                        start + int(end_ms * 1e6), step))
    if wait_ms:
        monitor.comm_wait(CommWaitEvent(step, start + int((step_ms - wait_ms) * 1e6), int(wait_ms * 1e6),
                                        sum(c[2] for c in comm), len(comm)))
    duration = int(step_ms * 1e6)
    monitor.step_end(hooks.StepEvent(step, start + duration, duration))
