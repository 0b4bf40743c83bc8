"""Hand-written traces with exact expected aggregates: columns, self times, grouping, shapes, steps."""
from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from instrumentation.format import trace as fmt
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.format.trace_stats import op_stats, step_time_us


def op(name, ts, dur, step, module="", phase="forward", shapes="4x3", nbytes=0, flops=None):
    args = {"step": step, "module": module, "phase": phase, "shapes": shapes, "dtype": "float32", "bytes": nbytes}
    if flops is not None:
        args["flops"] = flops
    return {"ph": "X", "cat": "op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": args}


def span(cat, name, ts, dur, step):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": {"step": step}}


OURS = {"metadata": {"writer": "flowscope"}, "traceEvents": [
    span("step", "step 0", 0, 100, 0), span("data", "data", 0, 10, 0),
    op("Linear", 10, 20, 0, "fc", shapes="4x3;2x3;2", nbytes=32, flops=48.0),
    op("ReLU", 30, 5, 0, "act", shapes="4x2", nbytes=32),
    op("ReLUBackward", 40, 6, 0, "act", "backward", shapes="4x2", nbytes=32),
    op("LinearBackward", 50, 14, 0, "fc", "backward", shapes="4x2", nbytes=56),
    span("optimizer", "SGD.step", 70, 20, 0),
    span("step", "step 1", 100, 100, 1),
    op("Linear", 110, 30, 1, "fc", shapes="8x3;2x3;2", nbytes=64, flops=96.0),
    span("module", "fc", 108, 34, 1),
    {"ph": "C", "name": "memory", "ts": 111, "pid": 1, "args": {"cpu.allocated": 640, "cpu.reserved": 640}},
]}


def test_grouped_by_op_exact() -> None:
    columns = columns_from_trace(OURS)
    assert columns.source == "flowscope" and step_time_us(columns) == 200.0
    rows = {row.key: row for row in op_stats(columns, "op")}
    linear = rows["Linear"]
    assert (linear.calls, linear.self_us, linear.total_us, linear.mean_us) == (2, 50.0, 50.0, 25.0)
    assert linear.percent_of_step == pytest.approx(25.0) and linear.bytes == 96 and linear.flops == 144.0
    assert math.isnan(rows["ReLU"].flops) and rows["LinearBackward"].self_us == 14.0
    assert [row.key for row in op_stats(columns, "op")][:2] == ["Linear", "LinearBackward"]  # by self time
    assert [row.key for row in op_stats(columns, "op", sort_by="calls")][0] == "Linear"


def test_grouped_by_module_and_shape() -> None:
    columns = columns_from_trace(OURS)
    rows = {row.key: row for row in op_stats(columns, "module")}
    assert rows["fc"].self_us == 64.0 and rows["fc"].calls == 1 and rows["fc"].total_us == 34.0  # from the span
    assert rows["act"].self_us == 11.0
    shapes = {row.key: row.calls for row in op_stats(columns, "shape")}
    assert shapes == {"Linear [4x3;2x3;2]": 1, "Linear [8x3;2x3;2]": 1, "ReLU [4x2]": 1, "ReLUBackward [4x2]": 1,
                      "LinearBackward [4x2]": 1}


def test_steps_phases_spans_and_memory() -> None:
    columns = columns_from_trace(OURS)
    assert columns.ops.step.tolist() == [0, 0, 0, 0, 1]
    assert [fmt.PHASES[p] for p in columns.ops.phase] == ["forward", "forward", "backward", "backward", "forward"]
    assert columns.spans.dur_us[columns.spans.of("data")].tolist() == [10.0]
    assert columns.memory_bytes.tolist() == [640]


def test_nested_foreign_ops_get_self_time_and_steps_from_spans() -> None:
    trace = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "ts": 0, "dur": 100, "pid": 1, "tid": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": 10, "dur": 50, "pid": 1, "tid": 5,
         "args": {"Input Dims": [[4, 3], [2, 3], [2]]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": 12, "dur": 30, "pid": 1, "tid": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": 14, "dur": 10, "pid": 1, "tid": 5},
        {"ph": "X", "cat": "cpu_op", "name": "AddmmBackward0", "ts": 70, "dur": 8, "pid": 1, "tid": 5},
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": 80, "dur": 15, "pid": 1,
         "tid": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "ts": 82, "dur": 4, "pid": 1, "tid": 5},
    ]}
    columns = columns_from_trace(trace)
    assert columns.source == "torch"
    rows = {row.key: row for row in op_stats(columns, "op")}
    self_us = (rows["aten::linear"].self_us, rows["aten::addmm"].self_us, rows["aten::copy_"].self_us)
    assert self_us == (20.0, 20.0, 10.0)
    assert rows["aten::linear"].total_us == 50.0
    assert columns.ops.step.tolist() == [7] * 5
    assert [fmt.PHASES[p] for p in columns.ops.phase] == ["forward", "forward", "forward", "backward", "optimizer"]
    assert "aten::linear [4x3;2x3;2]" in {row.key for row in op_stats(columns, "shape")}


def test_shapes_round_trip_and_errors() -> None:
    shapes = ((64, 784), (), (10,))
    assert fmt.format_shapes(shapes) == "64x784;();10" and fmt.parse_shapes("64x784;();10") == shapes
    with pytest.raises(ValueError, match="group_by must be one of"):
        op_stats(columns_from_trace(OURS), "layer")


def test_read_trace_accepts_gzip_plain_and_bare_lists(tmp_path) -> None:
    (tmp_path / "a.pt.trace.json").write_text(json.dumps(OURS))
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(json.dumps(OURS["traceEvents"]).encode()))
    (tmp_path / "bad.json").write_text("{nope")
    assert len(fmt.read_trace(tmp_path / "a.pt.trace.json")["traceEvents"]) == 11
    assert len(fmt.read_trace(tmp_path / "b.json.gz")["traceEvents"]) == 11
    with pytest.raises(ValueError, match="bad.json is not a Chrome trace"):
        fmt.read_trace(tmp_path / "bad.json")


def test_capture_ids_and_request_protocol(tmp_path) -> None:
    first = fmt.new_capture_dir(tmp_path, wall_time_s=0.0)
    second = fmt.new_capture_dir(tmp_path, wall_time_s=0.0)
    assert first.endswith("plugins/profile/1970_01_01_00_00_00") and second.endswith("1970_01_01_00_00_00_1")
    assert fmt.is_capture_id("1970_01_01_00_00_00_1") and not fmt.is_capture_id("../x")
    assert fmt.read_capture_status(tmp_path).state == "none"
    request = fmt.write_capture_request(tmp_path, 5)
    status = fmt.read_capture_status(tmp_path)
    assert (status.state, status.steps, status.request_id) == ("pending", 5, request.request_id)
    with pytest.raises(ValueError, match="steps must be an integer in 1..1000, got 0"):
        fmt.write_capture_request(tmp_path, 0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        fmt.write_capture_request(tmp_path / "missing", 3)
    fmt.write_capture_outcome(tmp_path, request, "1970_01_01_00_00_00")
    (tmp_path / fmt.PROFILE_RELDIR / fmt.CAPTURE_REQUEST_NAME).unlink()
    assert fmt.read_capture_status(tmp_path).capture_id == "1970_01_01_00_00_00"
    assert np.array_equal(sorted(p.name for p in (tmp_path / fmt.PROFILE_RELDIR).iterdir()),
                          sorted(["1970_01_01_00_00_00", "1970_01_01_00_00_00_1", fmt.CAPTURE_DONE_NAME]))
