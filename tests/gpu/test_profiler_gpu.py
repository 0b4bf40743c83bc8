"""GPU time in the profiler on a real device: the CUDA event timer around ops, read once at the step end."""
from __future__ import annotations

import pytest

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the CUDA profiler tests need it and a device")

from engine import hooks  # noqa: E402
from engine.backend.cuda.timing import KernelTimer  # noqa: E402
from instrumentation.profiler.gpu_lane import gpu_busy_ns  # noqa: E402

# tests/gpu/conftest.py marks these `gpu` and skips them, with the reason, where no CUDA device answers


def test_timer_records_each_device_op_and_skips_host_ops() -> None:
    timer = KernelTimer(cupy)
    read: list[tuple[int, list]] = []
    timer.listeners.append(lambda step, records: read.append((step, records)))
    timer.start()
    a = cupy.random.random((2048, 2048), dtype=cupy.float32)
    small = cupy.ones(16, dtype=cupy.float32)
    for name, operands, work in (("MatMul", (a,), lambda: a @ a), ("Add", (small,), lambda: small + 1),
                                 ("Host", (None,), lambda: None), ("MatMul", (a,), lambda: a @ a @ a)):
        timer.op_begin(name, "", operands)
        work()
        timer.op(name, "", operands, (), 0, 0)
    timer.step_end(hooks.StepEvent(0, 0, 0))
    [(step, records)] = read
    assert step == 0 and [r[0] for r in records] == [0, 1, 3]  # op 2 ran no kernels
    durations = {r[0]: r[3] - r[2] for r in records}
    assert durations[3] > durations[0] > durations[1] > 0  # two products take longer than one, one than an add
    starts = [r[2] for r in records]
    assert starts == sorted(starts)
    assert 0 < gpu_busy_ns(records) <= records[-1][3] - records[0][2]
