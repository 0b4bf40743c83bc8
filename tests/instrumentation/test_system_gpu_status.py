"""The sampler's GPU status file: NVML found (through the pynvml stand-in) or absent, and why."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_pynvml import fake_pynvml
from instrumentation import SummaryWriter, SystemSampler
from instrumentation.format.system_status import GPU_STATUS_RELPATH, GpuStatus, read_gpu_status, write_gpu_status


@pytest.mark.parametrize(("options", "nvml", "gpus", "reason"), [
    ({"nvml": fake_pynvml(gpus=2)}, True, 2, "sampling 2 GPU(s) through NVML"),
    ({"nvml": fake_pynvml(init_error=True)}, False, 0,
     "NVML is not available (FakeNvmlError: NVML Shared Library Not Found)"),
    ({"nvml": fake_pynvml(gpus=0)}, False, 0, "NVML sees no GPU"),
    ({"gpus": False}, False, 0, "GPU sampling off"),
])
def test_the_sampler_records_whether_it_reads_nvml_and_why_not(tmp_path: Path, options, nvml, gpus, reason) -> None:
    with SummaryWriter(tmp_path) as writer:
        sampler = SystemSampler(writer, start=False, **options)
        sampler.close()
    status = read_gpu_status(tmp_path)
    assert (status.nvml, status.gpus) == (nvml, gpus) and reason in status.reason


def test_without_nvidia_ml_py_the_reason_names_the_package(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import pynvml raises ImportError
    with SummaryWriter(tmp_path) as writer:
        SystemSampler(writer, start=False).close()
    status = read_gpu_status(tmp_path)
    assert not status.nvml and "nvidia-ml-py package is not installed" in status.reason


def test_missing_or_malformed_status_reads_as_none(tmp_path: Path) -> None:
    assert read_gpu_status(tmp_path) is None
    write_gpu_status(tmp_path, GpuStatus(False, 0, "no driver"))
    assert read_gpu_status(tmp_path) == GpuStatus(False, 0, "no driver")
    (tmp_path / GPU_STATUS_RELPATH).write_text('{"nvml": true}')
    assert read_gpu_status(tmp_path) is None
    (tmp_path / GPU_STATUS_RELPATH).write_text("not json")
    assert read_gpu_status(tmp_path) is None
