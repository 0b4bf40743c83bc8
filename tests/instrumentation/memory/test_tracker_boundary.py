"""MemoryTracker with stacks off reads the allocator at step boundaries: same scalars, blocks, leaks and OOM as the
per-event path (run side by side as the oracle), without an alloc/free observer."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks, memory
from instrumentation import SummaryWriter
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_snapshot import list_snapshots, read_snapshot
from instrumentation.memory import MemoryTracker
from scalars_helpers import read_scalars
from training_loops import BATCH, HIDDEN, train


@pytest.fixture()
def pair(tmp_path: Path):
    """(event-path tracker, boundary tracker), each with its own run directory."""
    hooks.reset_step(0)
    writers = [SummaryWriter(tmp_path / name) for name in ("events", "boundary")]
    trackers = (MemoryTracker(writers[0], stacks=True), MemoryTracker(writers[1], stacks=False))
    yield trackers
    for tracker, writer in zip(trackers, writers):
        tracker.close()
        writer.close()
    memory.set_limit(None)
    hooks.reset_step(0)


def test_only_oom_is_observed_and_step_ends_come_from_the_allocator(pair) -> None:
    _, boundary = pair
    owners = {id(getattr(h, "__self__", None)) for h in hooks.buffer_alloc + hooks.buffer_free + hooks.step_end}
    assert id(boundary) not in owners and id(boundary._steps) in owners  # the step ends: its engine step log
    assert any(getattr(h, "__self__", None) is boundary for h in hooks.oom)
    assert not any(getattr(h, "__self__", None) is boundary._history_recorder for h in hooks.buffer_alloc)
    boundary.close()
    pair[0].close()
    assert not hooks.step_end and not hooks.recorders  # no step log left: mark_step_end calls nothing


def test_scalars_equal_the_event_path(pair) -> None:
    events, boundary = pair
    train(12)
    for tracker in pair:
        tracker.writer.flush()
    expected, got = read_scalars(events.run_dir), read_scalars(boundary.run_dir)
    tags = [t for t in expected if t.startswith("mem/cpu/")]
    assert "mem/cpu/gradient_bytes" in tags and "mem/cpu/peak_bytes" in tags
    for tag in tags:
        assert got[tag] == expected[tag], tag


def test_snapshot_blocks_equal_the_event_path_and_history_is_empty(pair) -> None:
    events, boundary = pair
    model_out = engine.tensor(np.ones((7, 3), np.float32)) * 2.0
    def fields(tracker):
        snapshot = read_snapshot(tracker.snapshot("manual"))
        return snapshot, sorted((b.bytes, b.shape, b.dtype, b.op, b.module, b.step, b.category)
                                for b in snapshot.blocks if b.op != "(before tracking)")
    (snap_e, blocks_e), (snap_b, blocks_b) = fields(events), fields(boundary)
    assert blocks_e and set(blocks_e) <= set(blocks_b)
    assert snap_b.allocator.allocated == sum(b.bytes for b in snap_b.blocks) == memory.allocated_bytes()
    assert snap_b.history == () and snap_e.history
    assert boundary.breakdown().by_category == events.breakdown().by_category
    del model_out


def test_leak_found_with_the_same_groups(pair) -> None:
    events, boundary = pair
    train(60, "hook")
    for tracker in pair:
        tracker.writer.flush()  # the batch not processed yet
    alerts = [[a for a in AlertReader(Path(t.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"] for t in pair]
    assert [len(a) for a in alerts] == [1, 1]
    top_e, top_b = alerts[0][0].evidence["groups"][0], alerts[1][0].evidence["groups"][0]
    for field in ("op", "module", "shape", "category", "dtype", "bytes_per_step"):
        expected = pytest.approx(top_e[field]) if field == "bytes_per_step" else top_e[field]
        assert top_b[field] == expected
    assert top_b["bytes_per_step"] == pytest.approx(BATCH * HIDDEN * 4)
    assert top_b["site"] == "(no stack) op Linear in fc1"
    assert alerts[1][0].evidence["bytes_per_step"] == pytest.approx(alerts[0][0].evidence["bytes_per_step"])


def test_peak_snapshot_holds_the_blocks_at_the_peak(tmp_path: Path) -> None:
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, peak_snapshot_interval_s=0.0)
        train(4)
        tracker.close()
        writer.flush()
        peaks = [s for f in list_snapshots(tracker.run_dir) if (s := read_snapshot(f.path)).reason == "peak"]
        assert peaks
        highest = max(peaks, key=lambda s: s.allocator.allocated)
        assert highest.allocator.allocated == max(read_scalars(tracker.run_dir)["mem/cpu/peak_bytes"].values())
        assert sum(b.bytes for b in highest.blocks) == highest.allocator.allocated


def test_oom_snapshot_and_alert_without_stacks(pair) -> None:
    _, boundary = pair
    memory.set_limit(90_000)
    with pytest.raises(engine.OutOfMemoryError) as raised:
        train(50, "hook")
    error = raised.value
    [snapshot] = [s for f in list_snapshots(boundary.run_dir) if (s := read_snapshot(f.path)).reason == "oom"]
    assert snapshot.allocator.allocated == error.allocated_bytes == sum(b.bytes for b in snapshot.blocks)
    kept = [b for b in snapshot.blocks if b.op == "Linear" and b.module == "fc1"]
    assert kept and all(b.bytes == BATCH * HIDDEN * 4 and b.stack == () for b in kept)
    [alert] = AlertReader(Path(boundary.run_dir) / ALERTS_RELPATH).read()
    assert alert.kind == "oom" and alert.evidence["requested_bytes"] == error.requested_bytes
