"""OOM under a CPU limit: the original exception propagates, after an ``oom`` snapshot and alert and a flush."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from engine import memory
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_snapshot import list_snapshots, read_snapshot
from scalars_helpers import read_scalars
from training_loops import BATCH, HIDDEN, line_of, train

LIMIT_BYTES = 90_000  # parameters + a batch + the hook's list reach it after a few steps


def test_oom_writes_snapshot_alert_and_flushes_then_raises_the_original_error(make_tracker) -> None:
    tracker = make_tracker()
    memory.set_limit(LIMIT_BYTES)
    with pytest.raises(engine.OutOfMemoryError) as raised:
        train(50, "hook")
    error = raised.value
    assert type(error) is engine.OutOfMemoryError and error.limit_bytes == LIMIT_BYTES
    assert error.allocated_bytes + error.requested_bytes > LIMIT_BYTES >= error.allocated_bytes

    [(snapshot_file, snapshot)] = [(f, s) for f in list_snapshots(tracker.run_dir)
                                    if (s := read_snapshot(f.path)).reason == "oom"]
    assert snapshot.reason == "oom" and snapshot.device == "cpu"
    assert snapshot.requested is not None and snapshot.requested.bytes == error.requested_bytes
    assert (snapshot.requested.op, snapshot.requested.module) == (error.op, error.module)
    assert snapshot.allocator.allocated == error.allocated_bytes == sum(b.bytes for b in snapshot.blocks)
    assert snapshot.allocator.limit == LIMIT_BYTES
    assert snapshot.allocator.largest_free_block == LIMIT_BYTES - error.allocated_bytes
    kept = [b for b in snapshot.blocks if b.op == "Linear" and b.module == "fc1"]
    leak_line = f"training_loops.py:{line_of('# leak: fc1 output')}"
    assert kept and all(b.stack[0].split(" ")[0].endswith(leak_line) for b in kept)
    assert all(b.bytes == BATCH * HIDDEN * 4 for b in kept)

    [alert] = AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read()
    assert (alert.kind, alert.severity) == ("oom", "error")
    assert alert.evidence["snapshot"] == snapshot_file.capture_id
    assert alert.evidence["requested_bytes"] == error.requested_bytes
    assert alert.evidence["largest_free_block"] == LIMIT_BYTES - error.allocated_bytes
    assert alert.step == snapshot.step

    steps_done = alert.step  # the OOM happened inside this step: the ones before it are on disk, flushed
    assert steps_done > 0
    scalars = read_scalars(tracker.run_dir)  # the writer is still open: only the flush put these in the file
    # ... and the OOM step itself, sampled when the alert fired: allocated as the error says, its peak so far
    assert sorted(scalars["mem/cpu/allocated_bytes"]) == list(range(steps_done + 1))
    assert scalars["mem/cpu/allocated_bytes"][steps_done] == error.allocated_bytes
    assert scalars["mem/cpu/peak_bytes"][steps_done] == snapshot.allocator.peak == error.allocated_bytes
    assert scalars["mem/cpu/limit_bytes"] == {0: LIMIT_BYTES}  # set before the first step: logged there, once
    assert snapshot.phase == "training"


def test_oom_propagates_when_the_snapshot_cannot_be_written(make_tracker, tmp_path: Path, capsys) -> None:
    tracker = make_tracker()
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    tracker.run_dir = str(blocker / "run")
    memory.set_limit(LIMIT_BYTES)
    with pytest.raises(engine.OutOfMemoryError):
        train(50, "hook")
    assert "cannot write a memory snapshot" in capsys.readouterr().err


def test_numpy_memory_error_with_no_limit_is_captured_like_a_refusal(make_tracker) -> None:
    tracker = make_tracker()
    column = engine.tensor(np.ones((1 << 24, 1), dtype=np.uint8))
    row = engine.tensor(np.ones((1, 1 << 24), dtype=np.uint8))
    with pytest.raises(engine.OutOfMemoryError) as raised:  # 256 TiB: NumPy itself cannot allocate it
        column * row
    error = raised.value
    assert (error.requested_bytes, error.limit_bytes, error.op) == (1 << 48, None, "Mul")
    [snapshot] = [s for f in list_snapshots(tracker.run_dir) if (s := read_snapshot(f.path)).reason == "oom"]
    assert snapshot.requested.bytes == 1 << 48 and snapshot.requested.op == "Mul"
    assert snapshot.allocator.limit is None and snapshot.allocator.largest_free_block is None
    assert snapshot.allocator.allocated == error.allocated_bytes
    [alert] = AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read()
    assert alert.kind == "oom" and "no limit set" in alert.message and alert.evidence["limit_bytes"] is None
