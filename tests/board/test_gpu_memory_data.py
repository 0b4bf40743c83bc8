"""The Memory and System pages' data for a run with device memory, NVML readings and a fragmentation alert."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from board.data.memory import device_title, devices, memory_alerts, timeline
from board.data.store import LogdirStore
from board.data.system import engine_memory_tags, gpu_status, gpus, nvml_note, series
from gpu_runs import MiB, STEPS, write_gpu_runs


def test_device_and_host_timelines_and_the_pools_reserved_bytes(tmp_path: Path) -> None:
    write_gpu_runs(tmp_path)
    store = LogdirStore(tmp_path)
    store.refresh()
    assert devices(store, "gpu") == ["cpu", "cuda:0"]  # the host first, then the device
    assert device_title("gpu", "cpu").startswith("gpu · host cpu") and "device cuda:0" in device_title("gpu", "cuda:0")
    device = timeline(store, "gpu", "cuda:0")
    assert device.steps.tolist() == list(range(STEPS))
    assert device.reserved is not None and device.reserved.tolist() == [(128 + 16 * s) * MiB for s in range(STEPS)]
    assert device.allocated.tolist() == [64 * MiB] * STEPS  # each step's activation was freed before its end
    assert device.peak.tolist() == [(64 + 8 + s) * MiB for s in range(STEPS)]
    assert (sum(device.bands.values()) == device.peak).all()
    assert timeline(store, "gpu", "cpu").reserved is None  # no pool on the host
    [alert] = memory_alerts(store, "gpu")
    assert alert.kind == "fragmentation" and alert.subject == "cuda:0" and alert.step == STEPS - 2


def test_system_data_has_nvml_beside_the_engines_device_memory(tmp_path: Path) -> None:
    write_gpu_runs(tmp_path)
    store = LogdirStore(tmp_path)
    store.refresh()
    assert gpus(store, "gpu") == [0]
    allocated_tag, reserved_tag = engine_memory_tags(0)
    assert series(store, "gpu", allocated_tag, "step").y.tolist() == [64 * MiB] * STEPS
    assert np.all(series(store, "gpu", reserved_tag, "step").y > 0)
    assert series(store, "gpu", "sys/gpu0/mem_used_bytes", "step").y.tolist() == [float(1 << 30)] * STEPS
    status = gpu_status(store, "gpu")
    assert status.nvml and status.gpus == 1 and nvml_note(status) is None
    absent = gpu_status(store, "no-nvml")
    assert not absent.nvml and "NVML Shared Library Not Found" in absent.reason
    note = nvml_note(absent)
    assert note.startswith("NVML is absent for this run") and "NVML Shared Library Not Found" in note
    assert gpus(store, "no-nvml") == []
