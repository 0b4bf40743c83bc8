"""The input pipeline's buffers in the allocator: prefetch queues, caches, shuffle buffers and parallel maps hold
`input` bytes attributed to their stage and the line that built it, registered on the iterating thread only and
released when elements leave."""
from __future__ import annotations

import gc
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks, memory
from engine.data import Dataset, stage_of
from engine.data import buffers

MiB = 1 << 20
SOURCE = Path(__file__)


def one_mib(index: np.ndarray) -> np.ndarray:
    return np.full(MiB // 4, index, np.float32)


def four_kib(index: np.ndarray) -> np.ndarray:
    return np.full(1024, index, np.float32)


def input_bytes() -> int:
    return memory.category_bytes("cpu").get("input", 0)


def stage_blocks(name: str) -> list[memory.Block]:
    return [b for b in memory.live_blocks("cpu") if stage_of(b.op) == name]


def settled_input_bytes(expected: int, before: int, tries: int = 4000) -> int:
    """The pipeline's input bytes once the producer threads reached ``expected`` (they run on their own: poll, settling
    each time, as a fetch would; ``tries`` bounds the wait so a regression fails instead of hanging)."""
    for _ in range(tries):
        buffers.settle()
        if input_bytes() - before == expected:
            break
        time.sleep(0.005)
    return input_bytes() - before


@pytest.fixture(autouse=True)
def clean_state():
    gc.collect()  # pipelines of earlier tests, dropped in reference cycles, release their buffers now
    buffers.settle()
    yield
    memory.set_limit(None)
    hooks.reset_step()  # every __next__ opens a step


def test_an_oversized_prefetch_queue_is_input_memory_of_its_stage_and_line() -> None:
    before = input_bytes()
    dataset, line = Dataset.from_tensor_slices(np.arange(101)).map(one_mib).prefetch(100), sys._getframe().f_lineno
    iterator = iter(dataset)
    assert next(iterator)[0] == 0
    # the producer fills the queue with elements 1..100 and then waits to put the end marker
    assert settled_input_bytes(100 * MiB, before) == 100 * MiB
    blocks = stage_blocks("prefetch")
    assert len(blocks) == 100 and {(b.bytes, b.category, b.shape, b.dtype) for b in blocks} == {
        (MiB, "input", (MiB // 4,), "float32")}
    built_at = f"{SOURCE.name}:{line} test_an_oversized_prefetch_queue_is_input_memory_of_its_stage_and_line"
    [op] = {b.op for b in blocks}
    assert op.startswith("prefetch(100) at ") and op.endswith(built_at)
    assert {b.site[0] for b in blocks} == {op.removeprefix("prefetch(100) at ")}
    for taken in range(1, 51):  # each element is released when the consumer takes it
        assert next(iterator)[0] == taken
        assert input_bytes() - before == (100 - taken) * MiB
    iterator.close()  # the 50 still queued leave with the pass
    assert input_bytes() == before and not stage_blocks("prefetch")


def test_dropping_the_iterator_or_finishing_the_pass_releases_everything() -> None:
    before = input_bytes()
    dataset = Dataset.from_tensor_slices(np.arange(12)).map(one_mib).prefetch(8)
    iterator = iter(dataset)
    next(iterator)
    assert settled_input_bytes(9 * MiB, before) == 9 * MiB  # 8 queued and the one the producer waits to put
    del iterator
    gc.collect()
    assert input_bytes() == before
    assert [int(e[0]) for e in dataset] == list(range(12)) and input_bytes() == before


class StageEvents:
    """The allocator's alloc/free events of pipeline stages, with the thread each was delivered on."""

    def __init__(self) -> None:
        self.allocs: list[tuple[str, int]] = []
        self.freed = 0
        self.threads: set[int] = set()
        self._ids: set[int] = set()

    def alloc(self, event: hooks.MemoryEvent) -> None:
        if stage_of(event.op):
            self.allocs.append((event.op, event.bytes))
            self._ids.add(event.buffer_id)
            self.threads.add(threading.get_ident())

    def free(self, event: hooks.MemoryEvent) -> None:
        if event.buffer_id in self._ids:
            self._ids.discard(event.buffer_id)
            self.freed += 1
            self.threads.add(threading.get_ident())


def test_worker_threads_never_touch_the_allocator_and_every_registration_is_released() -> None:
    events = hooks.subscribe(StageEvents())
    try:
        before = input_bytes()
        # the map's results are taken by the first prefetch's thread, whose queue the second prefetch's thread empties
        dataset = (Dataset.from_tensor_slices(np.arange(40)).map(one_mib, num_parallel_calls=3).shuffle(6, seed=1)
                   .prefetch(4).prefetch(2))
        values = [int(element[0]) for element in dataset]
    finally:
        hooks.unsubscribe(events)
    assert sorted(values) == list(range(40))
    assert events.threads == {threading.get_ident()}  # map workers and the prefetch thread only queued their changes
    assert {stage_of(op) for op, _ in events.allocs} <= {"map", "shuffle", "prefetch"}
    assert "shuffle" in {stage_of(op) for op, _ in events.allocs}  # the buffer of 6 held elements between fetches
    assert all(nbytes == MiB for _, nbytes in events.allocs)
    assert events.freed == len(events.allocs) and input_bytes() == before


def test_a_failing_pipeline_releases_what_its_stages_held() -> None:
    def fail_at_five(index: np.ndarray) -> np.ndarray:
        if index == 5:
            raise ValueError("element 5 is corrupt")
        return one_mib(index)

    before = input_bytes()
    dataset = Dataset.from_tensor_slices(np.arange(10)).map(fail_at_five).cache().prefetch(3)
    with pytest.raises(ValueError, match="element 5 is corrupt"):
        for _ in dataset:
            pass
    assert input_bytes() == before and not stage_blocks("cache") and not stage_blocks("prefetch")


def test_a_cache_grows_by_each_recorded_element_and_is_released_with_its_dataset() -> None:
    before = input_bytes()
    dataset, line = Dataset.from_tensor_slices(np.arange(6)).map(four_kib).cache(), sys._getframe().f_lineno
    iterator = iter(dataset)
    for count in range(1, 4):
        next(iterator)
        assert input_bytes() - before == count * 4096
    [op] = {b.op for b in stage_blocks("cache")}
    assert op.startswith("cache() at ") and op.endswith(
        f"{SOURCE.name}:{line} test_a_cache_grows_by_each_recorded_element_and_is_released_with_its_dataset")
    assert len(list(iterator)) == 3 and input_bytes() - before == 6 * 4096  # the complete pass is stored
    assert [int(e[0]) for e in dataset] == list(range(6))
    assert input_bytes() - before == 6 * 4096  # a replay adds nothing
    del dataset, iterator
    gc.collect()
    assert input_bytes() == before and not stage_blocks("cache")


def test_an_abandoned_first_pass_of_a_cache_holds_nothing() -> None:
    before = input_bytes()
    dataset = Dataset.from_tensor_slices(np.arange(6)).map(four_kib).cache()
    iterator = iter(dataset)
    next(iterator), next(iterator)
    assert input_bytes() - before == 2 * 4096
    iterator.close()
    assert input_bytes() == before


def test_rows_of_the_source_are_not_the_stage_s_bytes_but_new_arrays_are() -> None:
    """A row of ``from_tensor_slices`` is a view of the user's array: holding it costs the stage nothing. A ``map``
    result is the stage's, even when it is a view (of the array the map made)."""
    x = np.arange(4 * 256, dtype=np.float32).reshape(4, 256)
    before = input_bytes()
    rows = Dataset.from_tensor_slices(x).shuffle(4, seed=0).map(lambda row: row).cache()
    np.testing.assert_array_equal(np.sort(np.stack(list(rows)), axis=0), x)
    assert input_bytes() == before  # four rows cached, all views of x
    made = Dataset.from_tensor_slices(x).map(lambda row: (row * 2).reshape(16, 16)).cache()
    assert len(list(made)) == 4 and input_bytes() - before == 4 * 256 * 4


def test_pipeline_buffers_count_against_the_limit_but_are_never_refused() -> None:
    """They exist already when a stage holds them: the fetch goes on, and the next engine allocation sees them."""
    before = input_bytes()
    memory.set_limit(memory.allocated_bytes("cpu") + 2 * MiB)
    iterator = iter(Dataset.from_tensor_slices(np.arange(8)).map(one_mib).prefetch(4))
    first = next(iterator)
    assert settled_input_bytes(5 * MiB, before) == 5 * MiB  # 4 queued and the one the producer waits to put
    assert memory.allocated_bytes("cpu") > memory.stats("cpu").limit_bytes
    with pytest.raises(engine.OutOfMemoryError, match="in use"):
        engine.tensor(first)
    assert [int(e[0]) for e in iterator] == list(range(1, 8)) and input_bytes() == before


def test_a_stage_whose_accounting_fails_is_reported_once_and_the_pipeline_goes_on(monkeypatch, capsys) -> None:
    register = memory.register

    def refuse_stages(array, category="activation", op="", site=None, check_limit=True):
        if stage_of(op):
            raise RuntimeError("no room in the books")
        return register(array, category, op, site, check_limit)

    monkeypatch.setattr(buffers.memory, "register", refuse_stages)
    monkeypatch.setattr(buffers, "_failures", set())  # reported once per process: not by an earlier test's stage
    gc.collect()  # earlier tests' tensors in reference cycles would otherwise be freed during the count
    before, buffers_before = input_bytes(), len(memory.live_buffers())
    # the map's results are left on the prefetch thread: their releases wait in the queue, with nothing to release
    dataset = Dataset.from_tensor_slices(np.arange(30)).map(one_mib, num_parallel_calls=2).prefetch(2)
    assert [int(e[0]) for e in dataset] == list(range(30))
    assert input_bytes() == before and len(memory.live_buffers()) == buffers_before
    reports = capsys.readouterr().err.splitlines()
    # NOTE: whether a map result is still held when the training thread settles is up to the thread scheduler
    assert len([line for line in reports if "no room in the books" in line]) <= 2  # once per stage at most
    # a cache records on the training thread itself: its refused registration is certain, and reported once
    cached = Dataset.from_tensor_slices(np.arange(3)).map(one_mib).cache()
    assert [[int(e[0]) for e in cached] for _ in range(2)] == [[0, 1, 2]] * 2
    assert input_bytes() == before
    reports = capsys.readouterr().err.splitlines()
    assert len([line for line in reports if "cannot account the buffers of cache() at" in line]) == 1
