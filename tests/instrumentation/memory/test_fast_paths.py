"""The leak check's shortcuts give the answers of the full computation: growth() vs trend().is_growth(), the
per-step live_set() records vs live_groups() at that step, end_step_peak() vs step_peak()/category_bytes()."""
from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks, memory
from instrumentation import SummaryWriter
from instrumentation.format.memory_snapshot import list_snapshots, read_snapshot
from instrumentation.memory import MemoryTracker
from instrumentation.memory.leak import LeakSettings, TrendWindow
from instrumentation.memory.trend import _close_pairs, growth, trend
from training_loops import train


def _windows(rng: np.random.Generator, min_slope: float) -> list[tuple[list[int], list[int]]]:
    """Flat, noisy, rising, falling, step-like and slow-drift windows over regular, gapped and repeated steps, and
    windows rising just above and just below ``min_slope`` per step."""
    n = 30
    regular, spaced = list(range(100, 100 + n)), list(range(0, 4 * n, 4))
    gapped = sorted(rng.choice(1000, n, replace=False).tolist())
    repeated = sorted(rng.integers(0, 12, n).tolist())
    shapes = [
        [5000] * n,
        (5000 + rng.integers(-50, 50, n)).tolist(),
        (5000 + 64 * np.arange(n)).tolist(),
        (5000 + 64 * np.arange(n) + rng.integers(-100, 100, n)).tolist(),
        (9000 - 7 * np.arange(n)).tolist(),
        [5000] * 20 + [9000] * 10,
        [5000] * 10 + [9000] * 20,
        (5000 + np.minimum(np.arange(n), 12) * 100).tolist(),  # a cache that fills and stops
        (138_000_000 + 4096 * (np.arange(n) // 2)).tolist(),  # RSS creeping by a page every other sample
        (138_000_000 + 70_000 * np.arange(n) + rng.integers(0, 4096, n)).tolist(),
        rng.integers(0, 2, n).tolist(),
    ]
    windows = [(steps, values) for steps in (regular, spaced, gapped, repeated) for values in shapes]
    for steps in (regular, spaced, gapped):
        for factor in (0.9, 1.05, 1.5):
            rate = max(min_slope, 1.0) * factor
            windows.append((steps, [int(5000 + rate * (s - steps[0])) + int(rng.integers(0, 3)) for s in steps]))
    return windows


@pytest.mark.parametrize(("min_slope", "min_z"), [(1.0, 4.0), (64 * 1024, 4.0), (16.0, 2.0), (1.0, -1.0),
                                                  (0.0, 4.0), (-1.0, 0.5)])
def test_growth_answers_as_the_full_trend(min_slope: float, min_z: float) -> None:
    rng = np.random.default_rng(7)
    answers = []
    for steps, values in _windows(rng, min_slope) + _windows(rng, min_slope):
        full = trend(steps, values)
        expected = full if full.is_growth(min_slope, min_z) else None
        assert growth(steps, values, min_slope, min_z) == expected, (steps, values)
        answers.append(expected is not None)
    assert any(answers) and not all(answers)


def test_growth_finds_a_rising_window_and_skips_flat_ones() -> None:
    steps = list(range(30))
    assert growth(steps, [100 + 8 * s for s in steps], 1.0, 4.0) is not None
    assert growth(steps, [100] * 30, 1.0, 4.0) is None


def test_observe_many_answers_as_observe_one_by_one() -> None:
    """The tracker hands a window a batch of steps at once: the same checks, at the same steps, as one by one."""
    rng = random.Random(0)
    found_any = False
    for _ in range(200):
        settings = LeakSettings(warmup_steps=rng.randint(0, 12), window_steps=rng.randint(6, 20),
                                check_every_steps=rng.randint(1, 7), min_z=rng.choice([0.5, 2.0]))
        one, many = TrendWindow(settings), TrendWindow(settings)
        step, by_one, by_many = 0, [], []
        for _ in range(12):
            steps = list(range(step, step + rng.randint(0, 9)))
            step += len(steps)
            values = [s * rng.choice([0, 1, 5]) + rng.randint(0, 3) for s in steps]
            by_one += [(s, t) for s, v in zip(steps, values) if (t := one.observe(s, v)) is not None]
            by_many += many.observe_many(steps, values)
        assert by_many == by_one
        assert list(many.steps) == list(one.steps) and list(many.values) == list(one.values)
        found_any |= bool(by_one)
    assert found_any


def test_close_pairs_counts_as_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        steps = sorted(rng.choice(200, int(rng.integers(2, 40)), replace=False).tolist())
        distance = float(rng.uniform(0, 60))
        expected = sum(1 for a, b in itertools.combinations(steps, 2) if b - a <= distance)
        assert _close_pairs(steps, distance) == expected


def test_a_live_set_record_keeps_the_groups_of_its_moment() -> None:
    keep = [engine.tensor(np.ones((3, 4), np.float32)) for _ in range(3)]
    record, then = memory.live_set(), memory.live_groups()
    more = [engine.tensor(np.ones(7, np.float32)), engine.tensor(np.ones((3, 4), np.float32))]
    del keep[:2]
    assert memory.live_groups(record) == then != memory.live_groups()
    assert memory.live_groups(memory.live_set()) == memory.live_groups()
    del keep, more


def test_end_step_peak_is_step_peak_and_category_bytes_then_a_reset() -> None:
    memory.reset_step_peak("cpu")
    a = engine.tensor(np.ones(1000, np.float32))
    b = a * 3.0
    del a
    peak, now = memory.step_peak("cpu"), memory.category_bytes("cpu")
    allocated, peak_bytes, at_peak, categories = memory.end_step_peak("cpu")
    assert (allocated, peak_bytes, at_peak, categories) == (memory.allocated_bytes("cpu"), peak.bytes,
                                                            peak.by_category, now)
    assert memory.step_peak("cpu").bytes == allocated  # reset
    c = engine.tensor(np.ones(100, np.float32))  # still rising after the reset: the peak is now
    allocated, peak_bytes, at_peak, categories = memory.end_step_peak("cpu")
    assert peak_bytes == allocated and at_peak == categories == memory.category_bytes("cpu")
    at_peak["activation"] = -1  # the dicts are the caller's
    assert memory.category_bytes("cpu")["activation"] >= 0 and memory.step_peak("cpu").by_category["activation"] >= 0
    assert memory.live_tensors("cpu") == memory.stats("cpu").live_tensors
    del b, c


def test_a_higher_peak_later_gets_its_own_snapshot(tmp_path: Path) -> None:
    """The tracker asks the allocator for a peak capture only when the size it wants changes; after a capture the
    allocator's size moved, so the next higher peak must still be captured."""
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, peak_snapshot_interval_s=0.0, peak_growth=0.0, leak=None,
                                batch_steps=1)  # each step processed at its end: every new peak is seen
        train(3)
        big = engine.tensor(np.ones(50_000, np.float32))  # 200 kB more than any peak so far
        train(2)
        tracker.close()
        peaks = sorted(s.allocator.allocated for f in list_snapshots(tracker.run_dir)
                       if (s := read_snapshot(f.path)).reason == "peak")
        assert len(peaks) >= 2 and peaks[-1] >= peaks[0] + 200_000
        del big


def test_memory_events_start_with_the_fields_the_tracker_unpacks() -> None:
    assert hooks.MemoryEvent._fields[:12] == ("action", "bytes", "device", "buffer_id", "category", "op", "module",
                                              "phase", "step", "shape", "dtype", "time_ns")


def _outer(depth: int, kept: list) -> None:
    _middle(depth, kept)


def _middle(depth: int, kept: list) -> None:
    _inner(depth, kept)


def _inner(depth: int, kept: list) -> None:
    kept.append(engine.tensor(np.ones(3, np.float32)))  # the allocation


def test_stacks_hold_stack_depth_user_frames_innermost_first(make_tracker) -> None:
    for depth in (1, 2, 3):
        tracker, kept = make_tracker(stacks=True, stack_depth=depth, leak=None), []
        for _ in range(2):  # the second time from the interned stacks
            _outer(depth, kept)
        blocks = read_snapshot(tracker.snapshot()).blocks
        stacks = {block.stack for block in blocks if block.op == "tensor" and block.shape == (3,)}
        assert len(stacks) == 1
        [stack] = stacks
        assert [frame.rsplit(" ", 1)[1] for frame in stack] == ["_inner", "_middle", "_outer"][:depth]
        assert stack[0].split(" ")[0].endswith(f"test_fast_paths.py:{_ALLOCATION_LINE}")
        tracker.close()


_ALLOCATION_LINE = next(number for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1)
                        if text.endswith("# the allocation"))


class _Recorder:
    """An independent record of the allocator's events: (action, bytes, op of the buffer, step)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str, int]] = []
        self.ops: dict[int, str] = {}

    def alloc(self, event: hooks.MemoryEvent) -> None:
        self.ops[event.buffer_id] = event.op
        self.events.append(("alloc", event.bytes, event.op, event.step))

    def free(self, event: hooks.MemoryEvent) -> None:
        self.events.append(("free", event.bytes, self.ops.pop(event.buffer_id, "?"), event.step))


def test_snapshot_history_lists_allocations_and_frees_with_their_op(make_tracker) -> None:
    tracker, recorder = make_tracker(stacks=True, leak=None, history=1000), _Recorder()
    hooks.subscribe(recorder)
    try:
        train(3)
        snapshot = read_snapshot(tracker.snapshot("manual"))
    finally:
        hooks.unsubscribe(recorder)
    got = [(h.action, h.bytes, h.op, h.step) for h in snapshot.history]
    assert got and got == recorder.events[-len(got):]
    assert {"alloc", "free"} <= {action for action, *_ in got}
    assert all(later.t >= earlier.t >= 0 for earlier, later in zip(snapshot.history, snapshot.history[1:]))


def test_a_window_wants_every_step_while_it_fills_and_while_its_last_values_rise() -> None:
    settings = LeakSettings(warmup_steps=0, window_steps=10)
    window = TrendWindow(settings)
    for step in range(9):
        window.observe(step, 100)
        assert window.wants_every_step()  # not full yet
    window.observe(9, 100)
    assert not window.wants_every_step()  # full and flat
    for step, value in zip(range(10, 13), (100, 96, 104)):  # flat, a dip, a rise
        window.observe(step, value)
    assert window.wants_every_step() is False  # 104 > 100 but only one rise in seven
    for step in range(13, 17):
        window.observe(step, 104 + step)  # four rises more
    assert window.wants_every_step()
    window.observe(17, 0)  # the last below the first of the span
    assert not window.wants_every_step()
