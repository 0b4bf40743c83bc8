"""The Profile page's data layer: capture discovery, the capture request guard, breakdown, timeline, torch traces."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from board.config import BoardConfig
from board.data.profile import BREAKDOWN_PARTS, step_breakdown, step_timeline, top_ops
from board.data.profile_captures import (CaptureRequestsDisabled, NotListening, TraceCache, find_captures,
                                         request_capture)
from instrumentation.format import trace as fmt
from instrumentation.format.capture_listener import write_listener
from instrumentation.format.trace_columns import columns_from_trace
from profile_fixtures import profiled_engine_run, torch_profiler_trace


def test_captures_are_found_per_run_and_breakdown_sums_to_step_time(tmp_path: Path) -> None:
    trace_path = profiled_engine_run(tmp_path / "logs" / "mlp")
    (tmp_path / "logs" / "mlp" / "notes.trace.json.gz").write_bytes(b"")  # not in a capture directory: ignored
    captures = find_captures(tmp_path / "logs")
    assert [(c.run, c.source, str(c.path)) for c in captures.values()] == [("mlp", "flowscope", trace_path)]
    columns = TraceCache().load(next(iter(captures.values())))
    breakdown = step_breakdown(columns)
    assert breakdown.steps.tolist() == [0, 1, 2, 3, 4, 5]
    total = np.sum([breakdown.parts_ms[p] for p in BREAKDOWN_PARTS], axis=0)
    assert np.allclose(total, breakdown.step_ms)
    assert np.all(breakdown.parts_ms["forward"] > 0) and np.all(breakdown.parts_ms["optimizer"] > 0)
    forward_ops = columns.ops.self_us[(columns.ops.step == 2) & (columns.ops.phase == 0)].sum() / 1e3
    assert breakdown.parts_ms["forward"][2] == pytest.approx(forward_ops)


def test_instrumentation_work_is_the_log_part_and_not_counted_twice(tmp_path: Path) -> None:
    profiled_engine_run(tmp_path / "logs" / "watched", watched=True)
    columns = TraceCache().load(next(iter(find_captures(tmp_path / "logs").values())))
    breakdown = step_breakdown(columns)
    assert breakdown.steps.tolist() == [0, 1, 2, 3, 4, 5]
    assert np.all(breakdown.parts_ms["log"] > 0)  # watch's hooks, its numerics check and the memory tracker
    total = np.sum([breakdown.parts_ms[p] for p in BREAKDOWN_PARTS], axis=0)
    assert np.allclose(total, breakdown.step_ms)  # nothing counted twice: "other" is not clipped to zero
    spans = columns.spans
    log_rows = spans.of(fmt.CAT_LOG)
    assert {spans.name[i] for i in log_rows} >= {"watch"}
    for position, step in enumerate(breakdown.steps):  # independently: the log spans inside each step span
        step_row = next(i for i in spans.of(fmt.CAT_STEP) if spans.step[i] == step)
        start, end = spans.ts_us[step_row], spans.ts_us[step_row] + spans.dur_us[step_row]
        inside = [i for i in log_rows if start <= spans.ts_us[i] and spans.ts_us[i] + spans.dur_us[i] <= end]
        assert breakdown.parts_ms["log"][position] == pytest.approx(sum(spans.dur_us[i] for i in inside) / 1e3)
        optimizer_rows = [i for i in spans.of(fmt.CAT_OPTIMIZER) if spans.step[i] == step]
        nested = sum(spans.dur_us[i] for i in inside for o in optimizer_rows
                     if spans.ts_us[o] <= spans.ts_us[i] and spans.ts_us[i] + spans.dur_us[i]
                     <= spans.ts_us[o] + spans.dur_us[o])
        assert nested > 0  # watch's optimizer_step_begin runs inside the optimizer span
        assert breakdown.parts_ms["optimizer"][position] == pytest.approx(
            (sum(spans.dur_us[o] for o in optimizer_rows) - nested) / 1e3)


def test_timeline_lanes_nest_ops_under_modules(tmp_path: Path) -> None:
    columns = columns_from_trace(fmt.read_trace(profiled_engine_run(tmp_path / "run")))
    timeline = step_timeline(columns, 3)
    assert timeline.lanes == ("step", "spans", "module 1", "ops")
    ops = timeline.lane == timeline.lanes.index("ops")
    assert ops.sum() == 8 and set(np.array(timeline.kind)[ops]) == {"forward", "backward"}
    step = timeline.lane == 0
    assert timeline.start_ms[step].tolist() == [0.0]
    assert np.all(timeline.start_ms[ops] + timeline.duration_ms[ops] <= timeline.duration_ms[step][0] + 1e-9)
    modules = np.flatnonzero(timeline.lane == timeline.lanes.index("module 1"))
    for op in np.flatnonzero(ops):
        if timeline.detail[op].startswith("(model)"):
            continue
        assert any(timeline.start_ms[m] <= timeline.start_ms[op] and timeline.start_ms[op] + timeline.duration_ms[op]
                   <= timeline.start_ms[m] + timeline.duration_ms[m] + 1e-9 for m in modules)


def test_torch_profiler_trace_opens_with_steps_phases_and_shapes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    path = torch_profiler_trace(tmp_path / "logs" / "torch_run")
    captures = list(find_captures(tmp_path / "logs").values())
    assert [(c.run, c.source, c.capture_id) for c in captures] == [("torch_run", "torch", path.name)]
    columns = TraceCache().load(captures[0])
    assert columns.source == "torch"
    assert len(step_breakdown(columns).steps) == 4
    rows = {row.key: row for row in top_ops(columns, "op")}
    assert rows["aten::addmm"].calls == 8  # two Linear layers, four steps
    assert rows["aten::linear"].self_us < rows["aten::linear"].total_us  # addmm runs inside linear
    phases = {fmt.PHASES[p] for p in columns.ops.phase}
    assert phases == {"forward", "backward", "optimizer"}
    assert any(key.startswith("aten::addmm [32x") or key.startswith("aten::addmm [10]") or "aten::addmm [" in key
               for key in (row.key for row in top_ops(columns, "shape")))


def test_capture_requests_only_into_known_runs_and_only_when_allowed(tmp_path: Path) -> None:
    run_dir = tmp_path / "logs" / "run"
    run_dir.mkdir(parents=True)
    run_dirs = {"run": run_dir}
    with pytest.raises(NotListening):  # no training process listens: nothing is written
        request_capture(run_dirs, "run", 3, allowed=True, logdir=tmp_path / "logs")
    assert list(run_dir.rglob("*")) == []
    write_listener(run_dir)  # this process listens
    request = request_capture(run_dirs, "run", 3, allowed=True, logdir=tmp_path / "logs")
    assert fmt.read_capture_status(run_dir).request_id == request.request_id
    assert sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")) == [
        "plugins", "plugins/profile", "plugins/profile/capture_listener.json", "plugins/profile/capture_request.json"]
    with pytest.raises(KeyError, match="unknown run '../run'"):
        request_capture(run_dirs, "../run", 3, allowed=True, logdir=tmp_path / "logs")
    with pytest.raises(CaptureRequestsDisabled, match="read-only"):
        request_capture(run_dirs, "run", 3, allowed=False, logdir=tmp_path / "logs")
    assert BoardConfig(logdir=tmp_path).allows_capture_requests
    assert not BoardConfig(logdir=tmp_path, read_only=True).allows_capture_requests
    assert not BoardConfig(logdir=tmp_path, host="0.0.0.0").allows_capture_requests
    assert BoardConfig(logdir=tmp_path, host="0.0.0.0", token="secret").allows_capture_requests


def _stats_rows(columns) -> list[tuple]:
    return [(s.key, s.calls, s.self_us, s.total_us, s.mean_us, s.percent_of_step, s.bytes, s.flops == s.flops)
            for group_by in ("op", "module", "shape") for s in top_ops(columns, group_by)]


def test_profiled_run_opens_from_its_sidecar_with_the_json_paths_results(tmp_path: Path, monkeypatch) -> None:
    trace_path = profiled_engine_run(tmp_path / "logs" / "mlp")
    assert Path(trace_path.replace(fmt.TRACE_SUFFIX, ".columns.npz")).is_file()
    capture = next(iter(find_captures(tmp_path / "logs").values()))  # the sidecar is not a capture of its own
    from_json = TraceCache(use_sidecar=False).load(capture)
    import board.data.profile_captures as captures_module

    def no_json(path):  # proves the next load never parses the trace
        raise AssertionError(f"parsed {path}")
    monkeypatch.setattr(captures_module.fmt, "read_trace", no_json)
    from_sidecar = TraceCache().load(capture)
    monkeypatch.undo()
    assert _stats_rows(from_sidecar) == _stats_rows(from_json) and len(_stats_rows(from_json)) > 5
    a, b = step_breakdown(from_sidecar), step_breakdown(from_json)
    assert np.array_equal(a.steps, b.steps) and np.array_equal(a.step_ms, b.step_ms)
    assert all(np.array_equal(a.parts_ms[p], b.parts_ms[p]) for p in BREAKDOWN_PARTS)
    ta, tb = step_timeline(from_sidecar, 3), step_timeline(from_json, 3)
    assert (ta.lanes, ta.name, ta.kind, ta.detail) == (tb.lanes, tb.name, tb.kind, tb.detail)
    assert np.array_equal(ta.start_ms, tb.start_ms) and np.array_equal(ta.duration_ms, tb.duration_ms)
    for field in ("name", "ts_us", "self_us", "step", "module", "phase", "shapes", "bytes"):
        assert np.array_equal(getattr(from_sidecar.ops, field), getattr(from_json.ops, field)), field
    assert from_sidecar.ops.names == from_json.ops.names and from_sidecar.spans.name == from_json.spans.name


def test_stale_or_corrupt_sidecar_falls_back_to_the_json(tmp_path: Path, caplog) -> None:
    trace_path = profiled_engine_run(tmp_path / "logs" / "mlp")
    sidecar = Path(trace_path.replace(fmt.TRACE_SUFFIX, ".columns.npz"))
    trace = fmt.read_trace(trace_path)
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "op"]
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e is not ops[-1]]  # the trace is rewritten
    fmt.write_trace(trace_path, trace)
    capture = next(iter(find_captures(tmp_path / "logs").values()))
    columns = TraceCache().load(capture)
    assert len(columns.ops) == len(ops) - 1 and "stale" in caplog.text
    sidecar.write_bytes(b"PK\x03\x04 not a zip archive")
    columns = TraceCache().load(capture)
    assert len(columns.ops) == len(ops) - 1 and "unreadable sidecar" in caplog.text
    assert _stats_rows(columns) == _stats_rows(columns_from_trace(trace))


def test_waiting_on_other_ranks_is_a_part_of_its_own_taken_out_of_the_optimizer_when_inside_it() -> None:
    """A hand-written flowscope trace of two steps (µs): step 0 waits for the gradient buckets (comm_wait) between
    backward and the optimizer, step 1 inside the optimizer span."""

    def event(cat, name, ts, dur, step, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": fmt.TID_HOST,
                "args": {fmt.ARG_STEP: step, **args}}

    events = []
    for step, origin, (wait_start, wait_us) in ((0, 0.0, (50.0, 30.0)), (1, 200.0, (82.0, 8.0))):
        events += [event(fmt.CAT_STEP, f"step {step}", origin, 100.0, step),
                   event(fmt.CAT_OP, "Linear", origin, 20.0, step, phase="forward"),
                   event(fmt.CAT_OP, "LinearBackward", origin + 20.0, 30.0, step, phase="backward"),
                   event(fmt.CAT_COMM_WAIT, fmt.CAT_COMM_WAIT, origin + wait_start, wait_us, step),
                   event(fmt.CAT_OPTIMIZER, "SGD.step", origin + 80.0, 15.0, step)]
    breakdown = step_breakdown(columns_from_trace({"traceEvents": events, "metadata": {"writer": "flowscope"}}))
    parts = {part: values.tolist() for part, values in breakdown.parts_ms.items()}
    assert parts["comm_wait"] == pytest.approx([0.030, 0.008])
    assert parts["optimizer"] == pytest.approx([0.015, 0.007])
    assert parts["other"] == pytest.approx([0.005, 0.035])
    assert (np.sum(list(breakdown.parts_ms.values()), axis=0) == pytest.approx(breakdown.step_ms))
