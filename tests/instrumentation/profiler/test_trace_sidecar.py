"""The columns sidecar: round trip equal to the JSON path (the bench's trace), stale/corrupt refusal, no pickle."""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

import engine
import instrumentation
from bench.profiler_overhead import big_trace, engine_step
from instrumentation.format import trace as fmt
from instrumentation.format import trace_sidecar as sidecar
from instrumentation.format.trace_columns import TraceColumns, columns_from_trace
from instrumentation.format.trace_stats import op_stats
from instrumentation.profiler.export import write_capture

FIELDS_OPS = ("name", "names", "category", "ts_us", "dur_us", "self_us", "tid", "step", "module", "modules", "phase",
              "shapes", "shape_strings", "bytes", "flops")


def assert_same_columns(got: TraceColumns, expected: TraceColumns) -> None:
    """Every column equal in dtype and value (NaN FLOPs included), tables and metadata equal."""
    for field in FIELDS_OPS:
        a, b = getattr(got.ops, field), getattr(expected.ops, field)
        if isinstance(b, tuple):
            assert a == b, field
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), field
    for field in ("category", "ts_us", "dur_us", "step"):
        a, b = getattr(got.spans, field), getattr(expected.spans, field)
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    assert got.spans.name == expected.spans.name
    for field in ("memory_ts_us", "memory_bytes"):
        a, b = getattr(got, field), getattr(expected, field)
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    assert got.metadata == expected.metadata and got.source == expected.source


def assert_same_stats(got: TraceColumns, expected: TraceColumns) -> None:
    for group_by in ("op", "module", "shape"):
        a, b = op_stats(got, group_by), op_stats(expected, group_by)
        assert [(s.key, s.calls, s.self_us, s.total_us, s.bytes) for s in a] == \
               [(s.key, s.calls, s.self_us, s.total_us, s.bytes) for s in b]


@pytest.fixture(scope="module")
def bench_trace() -> dict:
    """The benchmark's generated trace (a real capture repeated in time), 30k events."""
    engine.hooks.reset_step()
    step = engine_step()
    with instrumentation.profile() as prof:
        for _ in range(5):
            step()
    return big_trace(prof.last_trace, 30_000)


def test_round_trip_of_the_bench_trace_equals_the_json_path(tmp_path: Path, bench_trace: dict) -> None:
    path = write_capture(tmp_path, bench_trace)
    assert os.path.exists(sidecar.sidecar_path(path)) and sidecar.sidecar_path(path).endswith(".columns.npz")
    from_json = columns_from_trace(fmt.read_trace(path))
    from_sidecar = sidecar.read_sidecar(path)
    assert len(from_json.ops) >= 10_000 and len(from_json.spans.ts_us) > 1_000
    assert not np.isnan(from_json.ops.flops).all() and np.isnan(from_json.ops.flops).any()
    assert_same_columns(from_sidecar, from_json)
    assert_same_stats(from_sidecar, from_json)
    assert fmt.read_trace(path)["traceEvents"] == json.loads(json.dumps(bench_trace["traceEvents"]))  # trace unchanged


def test_sidecar_holds_no_object_arrays_and_refuses_pickles(tmp_path: Path, bench_trace: dict) -> None:
    path = write_capture(tmp_path, bench_trace)
    with zipfile.ZipFile(sidecar.sidecar_path(path)) as archive:
        for name in archive.namelist():
            array = np.lib.format.read_array(io.BytesIO(archive.read(name)), allow_pickle=False)
            assert array.dtype.kind in "iuf" and not array.dtype.hasobject, name
    arrays = dict(np.load(sidecar.sidecar_path(path), allow_pickle=False))
    arrays["op_flops"] = np.array([{"pickled": True}] * len(arrays["op_flops"]), dtype=object)
    with open(sidecar.sidecar_path(path), "wb") as handle:
        np.savez(handle, **arrays)
    with pytest.raises(sidecar.SidecarError, match="unreadable sidecar"):
        sidecar.read_sidecar(path)


def test_stale_corrupt_and_mismatched_sidecars_are_refused(tmp_path: Path, bench_trace: dict) -> None:
    path = write_capture(tmp_path, bench_trace)
    side = sidecar.sidecar_path(path)
    good = Path(side).read_bytes()
    Path(side).write_bytes(good[: len(good) // 2])  # truncated
    with pytest.raises(sidecar.SidecarError, match="unreadable"):
        sidecar.read_sidecar(path)
    Path(side).write_bytes(good)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, other bytes
    with pytest.raises(sidecar.SidecarError, match="digest"):
        sidecar.read_sidecar(path)
    Path(path).write_bytes(data + b"\0")
    with pytest.raises(sidecar.SidecarError, match="stale"):
        sidecar.read_sidecar(path)
    Path(path).write_bytes(data)
    sidecar.read_sidecar(path)  # intact again
    arrays = dict(np.load(side, allow_pickle=False))
    for name, value, message in (("op_ts_us", arrays["op_ts_us"].astype(np.float32), "expected 1-d float64"),
                                 ("op_step", arrays["op_step"][:-1], "rows"),
                                 ("op_name", arrays["op_name"] + 10_000, "outside"),
                                 ("header", np.frombuffer(b'{"version": 99}', np.uint8), "version 99")):
        with open(side, "wb") as handle:
            np.savez(handle, **dict(arrays, **{name: value}))
        with pytest.raises(sidecar.SidecarError, match=message):
            sidecar.read_sidecar(path)
    os.remove(side)
    with pytest.raises(FileNotFoundError):
        sidecar.read_sidecar(path)
    with pytest.raises(ValueError, match="no sidecar"):
        sidecar.sidecar_path(tmp_path / "worker0.pt.trace.json.gz")
