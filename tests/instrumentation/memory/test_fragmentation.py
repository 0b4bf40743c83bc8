"""The fragmentation alert: the watch on synthetic pool figures, and the tracker writing it with reserved bytes."""
from __future__ import annotations

import os

import pytest

from engine import hooks, memory
from instrumentation.format import alert_names as names
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.memory.fragmentation import FRAGMENTATION_MIN_BYTES, FRAGMENTATION_THRESHOLD, FragmentationWatch
from scalars_helpers import read_scalars

MiB = 1 << 20
DEVICE = "cuda:5"


def pool(fragmentation: int | None, reserved: int, allocated: int = 0, device: str = DEVICE) -> memory.PoolStats:
    chunks = None if fragmentation is None else ()
    return memory.PoolStats(device, allocated, reserved, allocated, None, 8 * MiB, chunks, fragmentation, 4 * MiB, True)


def test_fires_past_the_threshold_once_then_rearms_below_half() -> None:
    watch = FragmentationWatch()
    reserved = 1024 * MiB
    below = int(reserved * FRAGMENTATION_THRESHOLD) - MiB
    assert watch.observe(pool(below, reserved), 1) is None
    alert = watch.observe(pool(int(reserved * 0.5), reserved, 300 * MiB), 2)
    assert alert is not None and alert.kind == names.FRAGMENTATION and alert.subject == DEVICE and alert.step == 2
    assert alert.evidence[names.FRAGMENTATION_SHARE] == pytest.approx(0.5)
    assert alert.evidence[names.RESERVED_BYTES] == reserved and alert.evidence[names.ALLOCATED_BYTES] == 300 * MiB
    assert "512.0 MiB of the 1.0 GiB reserved on cuda:5 (50%, threshold 30%)" in alert.message
    assert watch.observe(pool(int(reserved * 0.6), reserved), 3) is None  # still fragmented: one alert
    assert watch.observe(pool(int(reserved * 0.2), reserved), 4) is None  # below the threshold, above its half
    assert watch.observe(pool(int(reserved * 0.5), reserved), 5) is None
    assert watch.observe(pool(int(reserved * 0.1), reserved), 6) is None  # below half: re-armed
    assert watch.observe(pool(int(reserved * 0.5), reserved), 7) is not None


def test_small_pools_and_pools_without_chunks_never_fire() -> None:
    watch = FragmentationWatch()
    assert watch.observe(pool(FRAGMENTATION_MIN_BYTES - 1, FRAGMENTATION_MIN_BYTES), 1) is None  # 99 %, but small
    assert watch.observe(pool(None, 1024 * MiB), 1) is None
    assert watch.observe(pool(0, 0), 1) is None
    with pytest.raises(ValueError, match="share in"):
        FragmentationWatch(threshold=1.5)


@pytest.fixture()
def pooled_device():
    """A device whose blocks are registered as a pool hook would and whose figures come from a pool reader."""
    figures = {"reserved": 0, "fragmentation": 0}
    memory.attach_pool(DEVICE, lambda: memory.PoolStats(
        DEVICE, memory.allocated_bytes(DEVICE), figures["reserved"], 0, None, 16 * MiB, (), figures["fragmentation"],
        0, True))
    yield figures
    for key, *_ in memory.live_buffers():
        if key < 0:
            memory.release_block(key)
    memory.detach_pool(DEVICE)
    memory._devices.pop(DEVICE, None)  # NOTE: later trackers must not see a device this test made up


def test_tracker_logs_the_pools_reserved_bytes_and_writes_the_alert(make_tracker, pooled_device) -> None:
    tracker = make_tracker(stacks=False, every=1, host_rss=False, leak=None, peak_snapshots=False)
    hooks.reset_step(0)
    key = memory.register_block(0x7E00_0000_0000, 100 * MiB, DEVICE)
    pooled_device["reserved"] = 400 * MiB
    hooks.mark_step_end()
    tracker.writer.flush()
    pooled_device["fragmentation"] = 200 * MiB  # half of what is reserved sits in chunks too small for 16 MiB
    hooks.mark_step_end()
    tracker.close()
    tracker.writer.flush()
    scalars = read_scalars(tracker.run_dir)
    assert scalars[f"mem/{DEVICE}/allocated_bytes"][0] == 100 * MiB
    assert scalars[f"mem/{DEVICE}/reserved_bytes"][0] == 400 * MiB
    assert scalars["mem/cpu/reserved_bytes"][0] == scalars["mem/cpu/allocated_bytes"][0]
    written = AlertReader(os.path.join(tracker.run_dir, ALERTS_RELPATH)).read()
    alerts = [a for a in written if a.kind == names.FRAGMENTATION]
    assert len(alerts) == 1 and alerts[0].subject == DEVICE
    assert alerts[0].evidence[names.FRAGMENTATION_BYTES] == 200 * MiB
    memory.release_block(key)
