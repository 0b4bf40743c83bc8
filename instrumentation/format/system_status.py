"""``<run>/plugins/system/gpu_status.json``: whether the system sampler could read NVIDIA GPUs through NVML, and if
not, why — written by ``SystemSampler`` when it starts, read by the System page for its note."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from instrumentation.format.confined import read_regular

GPU_STATUS_RELPATH = os.path.join("plugins", "system", "gpu_status.json")


@dataclass(frozen=True, slots=True)
class GpuStatus:
    """``nvml``: NVML was opened and sees ``gpus`` GPUs; otherwise ``reason`` says what is missing (the package,
    the driver's library, a GPU) or that GPU sampling was turned off."""

    nvml: bool
    gpus: int
    reason: str


def write_gpu_status(run_dir: str | os.PathLike[str], status: GpuStatus) -> str:
    """Write ``status`` (a temporary file renamed over the old one); returns its path."""
    path = os.path.join(os.fspath(run_dir), GPU_STATUS_RELPATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({"nvml": status.nvml, "gpus": status.gpus, "reason": status.reason}, handle)
    os.replace(temporary, path)
    return path


def read_gpu_status(run_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> GpuStatus | None:
    """The run's status; None when there is none (no sampler, or an older one) or it is unreadable."""
    try:
        data = json.loads(read_regular(Path(run_dir) / GPU_STATUS_RELPATH, root))
        return GpuStatus(bool(data["nvml"]), int(data["gpus"]), str(data["reason"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
