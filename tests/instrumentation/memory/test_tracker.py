"""MemoryTracker against the engine's own accounting: per-step scalars, category bands, snapshots, stacks, close."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks, memory
from instrumentation.format.memory_snapshot import list_snapshots, read_snapshot
from scalars_helpers import read_scalars
from training_loops import BATCH, FEATURES, HIDDEN, MLP, train


def test_step_scalars_match_the_engine_accounting(make_tracker) -> None:
    tracker = make_tracker()
    allocated = train(12)
    tracker.writer.flush()
    scalars = read_scalars(tracker.run_dir)
    assert [scalars["mem/cpu/allocated_bytes"][step] for step in range(12)] == allocated
    assert scalars["mem/cpu/reserved_bytes"] == scalars["mem/cpu/allocated_bytes"]  # no pool on the CPU
    for step in range(12):
        bands = sum(values[step] for tag, values in scalars.items()
                    if tag.startswith("mem/cpu/") and tag.endswith("_bytes") and tag.split("/")[-1][:-6] in
                    ("parameter", "gradient", "optimizer_state", "activation", "temporary", "input"))
        assert bands == scalars["mem/cpu/peak_bytes"][step]  # the category bands stack up to the step's peak
        assert scalars["mem/cpu/peak_bytes"][step] >= allocated[step]
    parameters = (64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10) * 4
    assert set(scalars["mem/cpu/parameter_bytes"].values()) == {parameters}
    assert scalars["mem/cpu/gradient_bytes"][5] == parameters  # the peak is reached with every gradient present
    assert "mem/host/rss_bytes" in scalars


def test_breakdown_by_category_and_module(make_tracker) -> None:
    tracker = make_tracker()
    model = MLP()
    kept = []
    model.fc1.register_forward_hook(lambda module, inputs, output: kept.append(output))
    for _ in range(3):
        logits = model(engine.tensor(np.zeros((BATCH, FEATURES), np.float32)))
    breakdown = tracker.breakdown("cpu")
    assert breakdown.allocated_bytes == memory.stats("cpu").allocated_bytes
    assert sum(breakdown.by_category.values()) == breakdown.allocated_bytes
    assert breakdown.by_category["parameter"] == sum(p.data.nbytes for p in model.parameters())
    assert breakdown.by_module["fc1"] == 3 * BATCH * HIDDEN * 4  # the hook's list: one fc1 output per call
    assert breakdown.by_module["fc2"] == logits.data.nbytes
    assert breakdown.peak_bytes >= breakdown.allocated_bytes


def test_manual_snapshot_round_trip_and_stacks(make_tracker) -> None:
    tracker = make_tracker(history=50)
    x = engine.tensor(np.ones((7, 3), np.float32))  # the line the stack must name
    line = line_of_here = __import__("inspect").currentframe().f_lineno - 1
    path = tracker.snapshot("manual")
    snapshot = read_snapshot(path)
    assert snapshot.reason == "manual" and snapshot.device == "cpu"
    mine = [b for b in snapshot.blocks if b.shape == (7, 3)]
    assert len(mine) == 1 and mine[0].bytes == 84 and mine[0].category == "input" and mine[0].dtype == "float32"
    assert mine[0].stack[0].endswith(f"test_tracker.py:{line} test_manual_snapshot_round_trip_and_stacks")
    assert snapshot.allocator.allocated == memory.stats("cpu").allocated_bytes == sum(b.bytes for b in snapshot.blocks)
    assert snapshot.allocator.largest_free_block is None  # no limit set
    assert len(snapshot.history) <= 50 and snapshot.history[-1].action == "alloc" and snapshot.history[-1].bytes == 84
    assert [f.path for f in list_snapshots(tracker.run_dir)] == [path]
    del x, line_of_here


def test_without_stacks_blocks_have_none(make_tracker) -> None:
    tracker = make_tracker(stacks=False)
    keep = engine.tensor(np.ones(5, np.float32))
    snapshot = read_snapshot(tracker.snapshot())
    assert all(block.stack == () for block in snapshot.blocks)
    del keep


def test_peak_snapshot_is_written_at_the_peak(make_tracker) -> None:
    tracker = make_tracker(peak_snapshot_interval_s=0.0)
    train(4)
    tracker.writer.flush()
    peaks = [read_snapshot(f.path) for f in list_snapshots(tracker.run_dir)]
    peaks = [s for s in peaks if s.reason == "peak"]
    assert peaks
    highest = max(peaks, key=lambda s: s.allocator.allocated)
    assert highest.allocator.allocated == memory.stats("cpu").peak_bytes or highest.allocator.allocated == max(
        read_scalars(tracker.run_dir)["mem/cpu/peak_bytes"].values())
    assert sum(b.bytes for b in highest.blocks) == highest.allocator.allocated  # the blocks live at that moment


def test_close_unsubscribes_and_is_idempotent(make_tracker) -> None:
    tracker = make_tracker()
    assert tracker in hooks.observers()
    tracker.close()
    tracker.close()
    assert tracker not in hooks.observers()


def test_blocks_allocated_before_tracking_are_counted(make_tracker) -> None:
    early = engine.tensor(np.ones(1000, np.float32))
    tracker = make_tracker()
    assert tracker.breakdown().allocated_bytes == memory.stats("cpu").allocated_bytes
    del early
    assert tracker.breakdown().allocated_bytes == memory.stats("cpu").allocated_bytes


def test_history_must_be_non_negative(tmp_path: Path) -> None:
    from instrumentation import MemoryTracker, SummaryWriter

    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match="history"):
        MemoryTracker(writer, history=-1)


def test_pause_stops_observing_and_resume_goes_on(make_tracker) -> None:
    tracker = make_tracker(history=1000)
    train(3)
    tracker.pause()
    tracker.pause()  # idempotent
    history_before = len(tracker._history_now())
    paused = engine.tensor(np.ones(13, np.float32))  # allocated while paused: no stack, no history record
    train(2)  # steps 3 and 4
    assert len(tracker._history_now()) == history_before
    tracker.resume()
    resumed = engine.tensor(np.ones(17, np.float32))
    train(2)  # steps 5 and 6
    tracker.writer.flush()
    scalars = read_scalars(tracker.run_dir)["mem/cpu/allocated_bytes"]
    assert sorted(scalars) == [0, 1, 2, 5, 6]
    blocks = {block.shape: block for block in read_snapshot(tracker.snapshot()).blocks}
    assert blocks[(13,)].stack == ()
    assert blocks[(17,)].stack[0].endswith("test_pause_stops_observing_and_resume_goes_on")
    assert len(tracker._history_now()) > history_before
    tracker.close()
    tracker.resume()  # closed: nothing
    assert not any(getattr(h, "__self__", None) is tracker for h in hooks.step_end)
    del paused, resumed


def test_a_pause_is_not_counted_as_step_time_by_the_pacer(make_tracker) -> None:
    """The batch after resume() hands the pacer the time of its own steps, not the time since the last step end
    before the pause (which would look like very long steps and make the tracker log more often)."""
    import time

    tracker = make_tracker(batch_steps=8, every=1)
    recorded: list[tuple[int, int]] = []
    record = tracker.pace.record
    tracker.pace.record = lambda step_ns, fixed_ns, run_ns, runs, steps: (
        recorded.append((step_ns, steps)) or record(step_ns, fixed_ns, run_ns, runs, steps))
    train(16)
    tracker.pause()
    time.sleep(1.0)
    tracker.resume()
    recorded.clear()
    began = time.perf_counter_ns()
    train(16)
    trained_ns = time.perf_counter_ns() - began
    tracker.writer.flush()
    assert recorded and sum(steps for _, steps in recorded) == 16
    # NOTE: each batch's step time is taken from step ends inside the 16 steps (the first one's 7 gaps scaled to 8
    # steps): never more than 8/7 of their wall time, however loaded the machine; with the 1 s pause in it, it would
    # be over 1 s (no fixed bound on how long 8 steps may take)
    assert max(step_ns for step_ns, _ in recorded) <= trained_ns * 8 / 7, (recorded, trained_ns)
