"""torch.profiler traces read in full: backward through autograd's links, [memory] events per op and as a curve,
checked against numbers computed here from the trace's own events and against torch's key_averages()."""
from __future__ import annotations

import collections

import numpy as np
import pytest

from board.data.profile import step_breakdown
from instrumentation.format import trace as fmt
from instrumentation.format.trace import read_trace
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.format.trace_stats import op_stats
from instrumentation.format.trace_torch import owners, parents
from profile_fixtures import torch_profiler_trace

torch = pytest.importorskip("torch")
EVALUATE = "autograd::engine::evaluate_function"


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[dict, object]:
    keep: list = []
    path = torch_profiler_trace(tmp_path_factory.mktemp("torch") / "run", steps=3, profile_memory=True, keep=keep)
    return read_trace(path), keep[0]


def _cpu_ops(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def _inside(inner: dict, outer: dict) -> bool:
    return (inner is not outer and inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"])


def test_backward_is_the_time_autograd_spends_and_its_matmuls_are_backward(traced) -> None:
    trace, _ = traced
    columns = columns_from_trace(trace)
    ops, phase = columns.ops, columns.ops.phase
    names = [ops.names[code] for code in ops.name.tolist()]
    # the forward pass uses addmm; every mm in this trace is a gradient matmul inside AddmmBackward0
    mm = [i for i, name in enumerate(names) if name == "aten::mm"]
    assert mm and all(fmt.PHASES[phase[i]] == "backward" for i in mm)
    # independent of the reader: autograd's evaluate_function events (outermost ones) hold all backward work
    events = _cpu_ops(trace)
    roots = [e for e in events if e["name"].startswith(EVALUATE)]
    outermost = [e for e in roots if not any(_inside(e, other) for other in roots)]
    backward_us = sum(e["dur"] for e in outermost)
    host = ops.category == 0
    ours_backward = ops.self_us[host & (phase == 1)].sum()
    assert ours_backward == pytest.approx(backward_us, rel=1e-9)
    top_level = [e for e in events if not any(_inside(e, other) for other in events)]
    assert ops.self_us[host].sum() == pytest.approx(sum(e["dur"] for e in top_level), rel=1e-9)
    breakdown = step_breakdown(columns)
    assert len(breakdown.steps) == 3
    assert (breakdown.parts_ms["backward"] > 0).all()  # each step has its backward part (no ratio of times: load)


def test_memory_events_are_each_ops_own_bytes_as_torch_counts_them(traced) -> None:
    trace, prof = traced
    columns = columns_from_trace(trace)
    ops = columns.ops
    net = collections.defaultdict(int)
    for code, allocated, freed in zip(ops.name.tolist(), ops.bytes.tolist(), ops.freed_bytes.tolist()):
        net[ops.names[code]] += allocated - freed
    torch_self = {e.key: e.self_cpu_memory_usage for e in prof.key_averages()}
    op_names = {e["name"] for e in _cpu_ops(trace)}
    assert sum(1 for name in op_names if torch_self.get(name)) >= 5  # ops that allocate
    assert {name: net[name] for name in op_names} == {name: torch_self.get(name, 0) for name in op_names}
    memory = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    assert ops.bytes.sum() == sum(e["args"]["Bytes"] for e in memory if e["args"]["Bytes"] > 0
                                  and any(_inside_point(e, op) for op in _cpu_ops(trace)))
    # the curve is the allocator's total after each event, in time order
    ordered = sorted(memory, key=lambda e: e["ts"])
    assert columns.memory_bytes.tolist() == [e["args"]["Total Allocated"] for e in ordered]
    assert columns.memory_ts_us.tolist() == [e["ts"] for e in ordered]


def _inside_point(point: dict, op: dict) -> bool:
    return point["tid"] == op["tid"] and op["ts"] <= point["ts"] <= op["ts"] + op["dur"]


def test_nesting_helpers_on_hand_written_intervals() -> None:
    # thread 1: A [0, 10] holds B [2, 6] which holds C [3, 4]; D [10, 12] starts where A ends; thread 2: E [0, 20]
    ts = np.array([0.0, 2.0, 3.0, 10.0, 0.0])
    dur = np.array([10.0, 4.0, 1.0, 2.0, 20.0])
    tid = np.array([1, 1, 1, 1, 2])
    assert parents(ts, dur, tid).tolist() == [-1, 0, 1, -1, -1]
    at_ts = np.array([0.0, 3.5, 5.0, 10.0, 11.0, 30.0, 7.0])
    at_tid = np.array([1, 1, 1, 1, 1, 1, 2])
    # a point at 10 is at D's start: D (which opened there) owns it, not A (ending there)
    assert owners(ts, dur, tid, at_ts, at_tid).tolist() == [0, 2, 1, 3, 3, -1, 4]


def test_kernels_keep_their_stream_and_take_the_phase_of_the_op_that_launched_them() -> None:
    """A hand-written torch trace of one CUDA step: forward addmm and backward mm each launch a kernel (matched by
    `correlation`, drawn by an `ac2g` flow); the backward runs on the autograd thread (tid 20)."""
    host, autograd, stream = 10, 20, 7

    def op(name, tid, ts, dur, cat="cpu_op", **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    def kernel(name, ts, dur, correlation):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"correlation": correlation, "stream": stream, "device": 0}}

    events = [
        op("ProfilerStep#0", host, 0, 100, cat="user_annotation"),
        op("aten::addmm", host, 1, 10, **{"Sequence number": 3, "Fwd thread id": 0}),
        op("cudaLaunchKernel", host, 2, 3, cat="cuda_runtime", correlation=7),
        kernel("sgemm_fwd", 6, 4, 7),
        op("autograd::engine::evaluate_function: AddmmBackward0", autograd, 20, 30, **{"Sequence number": 3,
                                                                                        "Fwd thread id": 1}),
        op("aten::mm", autograd, 22, 10),
        op("cudaLaunchKernel", autograd, 23, 2, cat="cuda_runtime", correlation=8),
        kernel("sgemm_bwd", 26, 5, 8),
        kernel("unlaunched_copy", 60, 1, 99),
        {"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": host, "ts": 2, "name": "ac2g"},
        {"ph": "f", "cat": "ac2g", "id": 7, "pid": 0, "tid": stream, "ts": 6, "name": "ac2g", "bp": "e"},
    ]
    columns = columns_from_trace({"schemaVersion": 1, "traceEvents": events})
    ops = columns.ops
    by_name = {ops.names[ops.name[i]]: i for i in range(len(ops))}
    phase = {name: fmt.PHASES[ops.phase[i]] for name, i in by_name.items()}
    assert phase == {"aten::addmm": "forward", "sgemm_fwd": "forward", "aten::mm": "backward",
                     "sgemm_bwd": "backward", "unlaunched_copy": "forward",
                     "autograd::engine::evaluate_function: AddmmBackward0": "backward"}
    kernels = [name for name, i in by_name.items() if ops.category[i] == 1]
    assert sorted(kernels) == ["sgemm_bwd", "sgemm_fwd", "unlaunched_copy"]
    assert {int(ops.tid[by_name[k]]) for k in kernels} == {stream}
    assert ops.step[by_name["sgemm_bwd"]] == 0


# --- a CNN fed by a DataLoader, with modules and memory: every per-op number against torch's key_averages -----------
DATALOADER = "enumerate(DataLoader)#"


@pytest.fixture(scope="module", params=["tensorboard_trace_handler", "export_chrome_trace"])
def cnn(request, tmp_path_factory) -> tuple[dict, object]:
    from profile_fixtures import torch_cnn_trace

    keep: list = []
    path = torch_cnn_trace(tmp_path_factory.mktemp("cnn") / "run", steps=3, keep=keep,
                           chrome=request.param == "export_chrome_trace")
    return read_trace(path), keep[0]


def test_per_op_time_calls_and_memory_are_torchs_key_averages(cnn) -> None:
    trace, prof = cnn
    stats = {s.key: s for s in op_stats(columns_from_trace(trace), "op")}
    averages = {e.key: e for e in prof.key_averages()}
    assert set(stats) == {e["name"] for e in _cpu_ops(trace)}
    assert sum(1 for s in stats.values() if s.self_net_bytes) >= 5 and any(s.total_net_bytes != s.self_net_bytes
                                                                            for s in stats.values())
    for key, stat in stats.items():
        torch_row = averages[key]
        # torch folds an op nested alone in one of its own name (aten::mean in aten::mean) into it: so do we
        assert stat.calls == torch_row.count, key
        assert stat.self_us == pytest.approx(torch_row.self_cpu_time_total, abs=1e-3 * stat.calls), key
        assert stat.self_net_bytes == torch_row.self_cpu_memory_usage, key  # torch's "Self CPU Mem": net
        assert stat.total_net_bytes == torch_row.cpu_memory_usage, key  # "CPU Mem": net, nested ops included
        assert stat.bytes >= max(stat.self_net_bytes, 0), key  # gross: allocations only


def test_dataloader_work_is_data_time_and_never_forward(cnn) -> None:
    trace, prof = cnn
    columns = columns_from_trace(trace)
    ops = columns.ops
    loaders = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith(DATALOADER)]
    inside = [e for e in _cpu_ops(trace) if any(_inside(e, loader) for loader in loaders)]
    assert len(inside) >= 3 * 16  # the loader's items are made with torch ops
    starts = {(int(ops.tid[i]), float(ops.ts_us[i])): fmt.PHASES[ops.phase[i]] for i in range(len(ops))}
    assert {starts[(e["tid"], float(e["ts"]))] for e in inside if (e["tid"], float(e["ts"])) in starts} == {"data"}
    breakdown = step_breakdown(columns)
    # the data part is the loader's spans (torch's own total for them), each step's parts add up to at most the step
    loader_us = sum(e.cpu_time_total for e in prof.key_averages() if e.key.startswith(DATALOADER))
    assert breakdown.parts_ms["data"].sum() == pytest.approx(loader_us / 1e3, rel=1e-6)
    parts = np.sum([breakdown.parts_ms[p] for p in breakdown.parts_ms if p != "other"], axis=0)
    assert (parts <= breakdown.step_ms + 1e-6).all()
    loader_self_ms = sum(ops.self_us[ops.phase == fmt.PHASES.index("data")]) / 1e3
    assert loader_self_ms > 0.1 * breakdown.parts_ms["data"].sum()
    assert breakdown.parts_ms["forward"].sum() + breakdown.parts_ms["data"].sum() <= breakdown.step_ms.sum()


def test_group_by_module_uses_torchs_module_events(cnn) -> None:
    trace, _ = cnn
    events = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"
              and e["name"].startswith("nn.Module: ")]
    root = [e for e in events if e["name"] == "nn.Module: Sequential_0"]
    children = [e for e in events if e not in root]
    expected = collections.defaultdict(lambda: [0, 0.0])
    for event in children:
        path = "Sequential_0." + event["name"][len("nn.Module: "):]
        expected[path][0] += 1
        expected[path][1] += event["dur"]
    stats = {s.key: s for s in op_stats(columns_from_trace(trace), "module")}
    assert {"Sequential_0.Conv2d_0", "Sequential_0.ReLU_0", "Sequential_0.Linear_0"} <= set(stats)
    for path, (calls, total_us) in expected.items():
        assert stats[path].calls == calls and stats[path].total_us == pytest.approx(total_us, rel=1e-9)
        assert stats[path].self_us <= stats[path].total_us + 1e-6
    # convolution's ops are the conv module's: its self time is the ops' self time inside its spans
    conv_spans = [e for e in children if e["name"] == "nn.Module: Conv2d_0"]
    conv_self_ops = [e for e in _cpu_ops(trace) if any(_inside(e, s) for s in conv_spans)]
    assert stats["Sequential_0.Conv2d_0"].calls == 3 and conv_self_ops
    # the ops outside every module (the loader's, backward, optimizer) are one row of their own
    assert "" in stats and stats[""].self_us > 0
