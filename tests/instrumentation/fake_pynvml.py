"""A fake ``pynvml`` module with nvidia-ml-py's names and deterministic readings (tests inject it)."""
from __future__ import annotations

import os
import types


class FakeNvmlError(Exception):
    pass


def fake_pynvml(gpus: int = 2, unsupported: tuple[int, str] | None = None,
                init_error: bool = False) -> types.ModuleType:
    """A module with pynvml's names and deterministic readings: GPU i uses (i+1) GiB of 80 GiB, util 10*(i+1) %,
    power 100 W + i, 60 + i °C; this process holds 512 MiB on GPU 0."""
    module = types.ModuleType("pynvml")
    module.NVMLError = FakeNvmlError
    module.NVML_TEMPERATURE_GPU = 0
    calls = {"shutdown": 0}

    def init() -> None:
        if init_error:
            raise FakeNvmlError("NVML Shared Library Not Found")

    def check(handle: int, metric: str) -> None:
        if unsupported == (handle, metric):
            raise FakeNvmlError("Not Supported")

    module.nvmlInit = init
    module.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)
    module.nvmlDeviceGetCount = lambda: gpus
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=(h + 1) << 30, total=80 << 30, free=0)
    module.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=10 * (h + 1), memory=0)

    def power(h: int) -> int:
        check(h, "power")
        return 100_000 + 1000 * h  # milliwatts

    module.nvmlDeviceGetPowerUsage = power
    module.nvmlDeviceGetTemperature = lambda h, sensor: 60 + h
    module.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=512 << 20 if h == 0 else None),
        types.SimpleNamespace(pid=1, usedGpuMemory=1 << 30)]  # another process: not ours
    module.calls = calls
    return module
