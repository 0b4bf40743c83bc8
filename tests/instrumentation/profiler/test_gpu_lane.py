"""GPU time in a capture without a device: real recorded CPU steps plus kernel timing records built by hand (the
(op index, stream, start_ns, end_ns) tuples the CUDA event timer produces) — trace lanes and flows, key_averages'
CUDA columns, the step breakdown's GPU busy/idle, the board's trace reader, and input_bound on GPU idle time."""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks
from engine.nn import functional as F
from board.data.profile import step_breakdown
from board.data.profile_captures import TraceCache, find_captures
from instrumentation.format import gpu_time
from instrumentation.format import trace as fmt
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.profiler.aggregate import key_averages
from instrumentation.profiler.export import build_trace, write_capture
from instrumentation.profiler.input_bound import InputBoundDetector
from instrumentation.profiler.recorder import Recorder

STREAM = 0x5A5A


def _recorded(steps: int = 3) -> Recorder:
    engine.manual_seed(0)
    model = engine.nn.Sequential(engine.nn.Linear(4, 3), engine.nn.ReLU(), engine.nn.Linear(3, 2))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    x, y = engine.tensor(np.ones((5, 4), dtype=np.float32)), engine.tensor(np.array([0, 1, 0, 1, 1]))
    recorder = Recorder(kernel_timer=None)
    recorder.timer = None  # NOTE: this machine may have CuPy: the records below are the only device time
    hooks.reset_step(0)
    recorder.start()
    for _ in range(steps):
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    recorder.stop()
    return recorder


def _kernels(recorder: Recorder) -> list[tuple]:
    """One kernel record per op: starting 3 µs after the op began, lasting 5 µs per op index modulo 4 (+1 µs), on
    one stream; every third op runs a second kernel record on another stream overlapping the first."""
    kernels = []
    for index, op in enumerate(recorder.ops):
        start = op.start_ns + 3_000
        kernels.append((index, STREAM, start, start + 1_000 + 5_000 * (index % 4)))
        if index % 3 == 0:
            kernels.append((index, STREAM + 1, start + 500, start + 2_500))
    return kernels


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    """Brute force: covered nanoseconds counted on a sorted sweep of the interval ends (an independent oracle)."""
    points = sorted({p for interval in intervals for p in interval})
    return sum(b - a for a, b in zip(points, points[1:]) if any(s <= a and b <= e for s, e in intervals))


def test_busy_time_is_the_union_of_the_intervals() -> None:
    rng = random.Random(3)
    for _ in range(50):
        intervals = [(s, s + rng.randint(0, 30)) for s in (rng.randint(0, 100) for _ in range(rng.randint(0, 12)))]
        assert gpu_time.busy_us([a for a, _ in intervals], [b for _, b in intervals]) == _union_ns(intervals)
        lo, hi = 20, 70
        clipped = [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]
        assert gpu_time.busy_us([a for a, _ in intervals], [b for _, b in intervals], lo, hi) == _union_ns(clipped)


def test_trace_has_a_lane_per_stream_and_a_flow_from_each_op_to_its_kernels() -> None:
    recorder = _recorded()
    recorder.added_kernels.extend(_kernels(recorder))
    trace = build_trace(recorder)
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == fmt.CAT_KERNEL]
    ops = [e for e in events if e.get("cat") == fmt.CAT_OP]
    assert len(kernels) == len(recorder.kernels) and trace["metadata"]["devices"] == ["cpu", "cuda"]
    lanes = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert lanes[gpu_time.GPU_TID_BASE] == f"GPU stream {STREAM}"
    assert lanes[gpu_time.GPU_TID_BASE + 1] == f"GPU stream {STREAM + 1}"
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    finishes = {e["id"]: e for e in events if e.get("ph") == "f"}
    assert set(starts) == set(finishes) and len(starts) == len(kernels)
    for (index, stream, start_ns, end_ns), kernel, flow_id in zip(recorder.kernels, kernels, sorted(starts)):
        op = ops[index]
        assert kernel["name"] == op["name"] and kernel["args"]["module"] == op["args"]["module"]
        assert kernel["tid"] == gpu_time.GPU_TID_BASE + (stream - STREAM)
        assert kernel["dur"] == pytest.approx((end_ns - start_ns) / 1000)
        begin, end = starts[flow_id], finishes[flow_id]
        assert (begin["cat"], begin["tid"], begin["ts"]) == ("ac2g", fmt.TID_HOST, op["ts"])
        assert (end["bp"], end["tid"], end["ts"]) == ("e", kernel["tid"], kernel["ts"])


def test_key_averages_has_cuda_columns() -> None:
    recorder = _recorded()
    records = _kernels(recorder)
    recorder.added_kernels.extend(records)
    averages = key_averages(build_trace(recorder))
    expected: dict[str, list[float]] = {}
    for index, _stream, start, end in records:
        expected.setdefault(recorder.ops[index].op, []).append((end - start) / 1000)
    by_key = {row.key: row for row in averages}
    for name, durations in expected.items():
        assert by_key[name].cuda_us == pytest.approx(sum(durations))
        assert by_key[name].cuda_calls == len(durations)
        assert by_key[name].cuda_mean_us == pytest.approx(sum(durations) / len(durations))
    table = averages.table()
    assert "CUDA ms" in table.splitlines()[0] and "CUDA us" in table.splitlines()[0]
    assert "CUDA" not in key_averages(build_trace(_recorded(1))).table()  # no device time: no CUDA columns


def test_step_breakdown_shows_gpu_busy_and_idle() -> None:
    recorder = _recorded()
    records = _kernels(recorder)
    recorder.added_kernels.extend(records)
    trace = build_trace(recorder)
    breakdown = step_breakdown(columns_from_trace(trace))
    steps = [s for s in recorder.spans if s[0] == fmt.CAT_STEP]
    assert len(steps) == 3 and breakdown.gpu_busy_ms is not None
    for row, (_, _, step_start, step_end, _step) in enumerate(steps):
        inside = [(max(s, step_start), min(e, step_end)) for _, _, s, e in records
                  if min(e, step_end) > max(s, step_start)]
        busy_ms = _union_ns(inside) / 1e6
        assert breakdown.gpu_busy_ms[row] == pytest.approx(busy_ms, abs=1e-6)
        assert breakdown.gpu_idle_ms[row] == pytest.approx((step_end - step_start) / 1e6 - busy_ms, abs=1e-6)
    assert step_breakdown(columns_from_trace(build_trace(_recorded(1)))).gpu_busy_ms is None


def test_the_board_reads_the_gpu_lanes_from_the_written_capture(tmp_path: Path) -> None:
    recorder = _recorded()
    recorder.added_kernels.extend(_kernels(recorder))
    run = tmp_path / "run"
    write_capture(run, build_trace(recorder))
    write_capture(run, build_trace(recorder), sidecar=False)
    captures = list(find_captures(tmp_path).values())
    assert len(captures) == 2
    for capture in captures:  # one through the sidecar, one parsed from the JSON
        columns = TraceCache().load(capture)
        assert int((columns.ops.category == 1).sum()) == len(recorder.kernels)
        assert step_breakdown(columns).gpu_busy_ms is not None


def _step(detector: InputBoundDetector, step: int, wait_ns: int, step_ns: int, kernels: list[tuple] | None) -> None:
    if wait_ns:
        detector.data_wait(hooks.DataWaitEvent(step, wait_ns, 0))
    if kernels is not None:
        detector.gpu_step(step, kernels)
    detector.step_end(hooks.StepEvent(step, step_ns, step_ns))


def test_input_bound_counts_a_wait_only_while_the_gpu_idles(tmp_path: Path) -> None:
    ms = 1_000_000
    busy = InputBoundDetector(tmp_path / "busy", window_steps=4)
    for step in range(4):  # the host waits 6 of 10 ms, but queued kernels keep the GPU busy 9 ms of them
        _step(busy, step, 6 * ms, 10 * ms, [(0, STREAM, 0, 5 * ms), (1, STREAM, 4 * ms, 9 * ms)])
    assert busy.alerts_written == 0
    idle = InputBoundDetector(tmp_path / "idle", window_steps=4)
    for step in range(4):  # the GPU runs 2 ms of the 10: the 6 ms wait is GPU idle time
        _step(idle, step, 6 * ms, 10 * ms, [(0, STREAM, 0, 2 * ms)])
    cpu = InputBoundDetector(tmp_path / "cpu", window_steps=4)
    for step in range(4):  # no device: the wait alone
        _step(cpu, step, 6 * ms, 10 * ms, None)
    assert idle.alerts_written == 1 and cpu.alerts_written == 1
    gpu_alert = AlertReader(os.path.join(tmp_path / "idle", ALERTS_RELPATH)).read()[0]
    cpu_alert = AlertReader(os.path.join(tmp_path / "cpu", ALERTS_RELPATH)).read()[0]
    assert gpu_alert.evidence["basis"] == "gpu_idle" and gpu_alert.evidence["gpu_idle_ms"] == pytest.approx(32.0)
    assert gpu_alert.evidence["data_wait_share"] == pytest.approx(0.6) and "with the GPU idle" in gpu_alert.message
    assert cpu_alert.evidence["basis"] == "data_wait" and "gpu_idle_ms" not in cpu_alert.evidence
