"""One memory truth: the mem/ scalars, the snapshots and the alerts name the same steps and bytes — an evaluation
after the last training step is logged as a sample at closing (its "peak" snapshot says "evaluation"), an alert's step
is logged, a leak snapshot's allocated bytes are those of its step end, and the allocator limit is logged."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import engine
from engine import memory
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_snapshot import EVALUATION, TRAINING, list_snapshots, read_snapshot
from scalars_helpers import read_scalars
from training_loops import train

EVALUATION_BYTES = 2**20  # what the evaluation holds at its peak, on top of what training left live


def snapshots(run_dir: str) -> list:
    return [read_snapshot(f.path) for f in list_snapshots(run_dir)]


def test_an_evaluation_after_training_is_the_last_sample_and_its_snapshot_says_evaluation(make_tracker) -> None:
    tracker = make_tracker(stacks=False, leak=None, host_rss=False, every=4)
    allocated = train(22, "")
    before = memory.allocated_bytes("cpu")
    with engine.no_grad():
        held = engine.tensor(np.zeros(EVALUATION_BYTES // 4, np.float32))  # the evaluation's peak
        del held
    after = memory.allocated_bytes("cpu")
    tracker.close()
    tracker.writer.flush()
    scalars = read_scalars(tracker.run_dir)
    peaks, logged = scalars["mem/cpu/peak_bytes"], scalars["mem/cpu/allocated_bytes"]
    # one step in 4 and the step in progress at closing (22, the evaluation's, with the highest since step 20)
    assert sorted(peaks) == [0, 4, 8, 12, 16, 20, 22]
    assert logged[20] == allocated[20] and logged[22] == after  # allocated when closing
    assert peaks[22] == before + EVALUATION_BYTES
    *earlier, highest = [s for s in snapshots(tracker.run_dir) if s.reason == "peak"]
    assert highest.allocator.allocated == max(peaks.values())  # the chart's highest point is the snapshot's
    assert (highest.step, highest.phase, highest.allocator.peak) == (22, EVALUATION, before + EVALUATION_BYTES)
    assert earlier and all(s.phase == TRAINING and s.step < 22 for s in earlier)


def test_no_sample_at_closing_without_a_new_peak_after_the_last_step(make_tracker) -> None:
    tracker = make_tracker(stacks=False, leak=None, host_rss=False, every=4)
    train(10, "")
    tracker.close()
    tracker.writer.flush()
    assert sorted(read_scalars(tracker.run_dir)["mem/cpu/peak_bytes"]) == [0, 4, 8, 9]


def test_the_leak_alert_step_is_logged_and_its_snapshot_is_that_step_end(make_tracker) -> None:
    tracker = make_tracker(stacks=False, every=5)
    allocated = train(200, "hook")
    tracker.close()
    tracker.writer.flush()
    [leak] = [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]
    scalars = read_scalars(tracker.run_dir)
    peaks, logged = scalars["mem/cpu/peak_bytes"], scalars["mem/cpu/allocated_bytes"]
    assert logged[leak.step] == allocated[leak.step]  # the alert's step is on the chart
    [snapshot] = [s for s in snapshots(tracker.run_dir) if s.reason == "leak"]
    assert snapshot.step == leak.step and snapshot.phase == TRAINING
    assert snapshot.allocator.allocated == allocated[leak.step] == sum(b.bytes for b in snapshot.blocks)
    # its peak: the highest allocated up to that step end, as the chart's peak line up to there
    assert snapshot.allocator.peak == max(value for step, value in peaks.items() if step <= leak.step)


def test_the_limit_is_logged_when_set_and_when_removed(make_tracker) -> None:
    memory.set_limit(64 * 2**20)
    tracker = make_tracker(stacks=False, leak=None, host_rss=False, every=1, batch_steps=8)
    train(8, "")
    memory.set_limit(None)
    train(8, "")
    tracker.close()
    tracker.writer.flush()
    limits = read_scalars(tracker.run_dir)["mem/cpu/limit_bytes"]
    assert sorted(limits) == [0, 8] and limits[0] == 64 * 2**20 and math.isnan(limits[8])
