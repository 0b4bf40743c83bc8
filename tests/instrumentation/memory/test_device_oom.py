"""A refused device request (over the engine's limit, or the device's own cudaErrorMemoryAllocation) is captured by
the memory tracker as on the CPU: an ``oom`` snapshot of the device with its pool figures, and an ``oom`` alert."""
from __future__ import annotations

import os

import pytest

import engine
from engine import hooks, memory
from instrumentation.format import alert_names as names
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_snapshot import list_snapshots, read_snapshot

MiB = 1 << 20
DEVICE = "cuda:6"


@pytest.fixture()
def pooled_device():
    chunks = (2 * MiB, 3 * MiB)
    memory.attach_pool(DEVICE, lambda: memory.PoolStats(
        DEVICE, memory.allocated_bytes(DEVICE), 16 * MiB, 0, None, 4 * MiB, chunks, 5 * MiB, 3 * MiB, True))
    yield
    for key, *_ in memory.live_buffers():
        if key < 0:
            memory.release_block(key)
    memory.set_limit(None, DEVICE)
    memory.detach_pool(DEVICE)
    memory._devices.pop(DEVICE, None)  # NOTE: later trackers must not see a device this test made up


@pytest.mark.parametrize("refusal", ["limit", "device"])
def test_a_refused_device_request_is_captured(make_tracker, pooled_device, refusal) -> None:
    tracker = make_tracker(stacks=False, leak=None, host_rss=False, peak_snapshots=False)
    hooks.reset_step(0)
    memory.register_block(0x7C00_0000_0000, 8 * MiB, DEVICE, op="Linear")
    if refusal == "limit":
        memory.set_limit(10 * MiB, DEVICE)
        with pytest.raises(engine.OutOfMemoryError):
            memory.check_device_room(DEVICE, 4 * MiB, "MatMul")
    else:  # what the CUDA allocator hook raises when CuPy's pool reports cudaErrorMemoryAllocation
        reason = "OutOfMemoryError: Out of memory allocating 4,194,304 bytes"
        error = memory.refused_by_device(4 * MiB, DEVICE, reason)
        assert isinstance(error, engine.OutOfMemoryError)
    tracker.close()
    [snapshot_file] = list_snapshots(tracker.run_dir)
    snapshot = read_snapshot(snapshot_file.path)
    assert (snapshot.reason, snapshot.device) == ("oom", DEVICE)
    assert snapshot.allocator.reserved == 16 * MiB and snapshot.allocator.largest_free_block == 3 * MiB
    assert snapshot.allocator.fragmentation == pytest.approx(5 / 16)
    assert [b.bytes for b in snapshot.blocks] == [8 * MiB] and snapshot.blocks[0].op == "Linear"
    [alert] = [a for a in AlertReader(os.path.join(tracker.run_dir, ALERTS_RELPATH)).read() if a.kind == names.OOM]
    assert alert.evidence["requested_bytes"] == 4 * MiB
    assert alert.evidence["limit_bytes"] == (10 * MiB if refusal == "limit" else None)
