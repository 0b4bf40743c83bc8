"""Recorded tuples -> a Chrome Trace Event Format dict (Perfetto-loadable), with module spans and FLOPs derived."""
from __future__ import annotations

import math
import os
import socket
import sys
import time
from typing import Any

import numpy as np

import engine
from engine.op_log import OpRecord
from instrumentation.format import trace as fmt
from instrumentation.format import trace_sidecar
from instrumentation.format.gcpause import gc_paused
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.profiler.comm_lane import comm_events, trace_rank
from instrumentation.profiler.gpu_lane import kernel_events
from instrumentation.profiler.recorder import Recorder

_ITEMSIZE: dict[str, int] = {}


def flops_of(op: str, shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...], output_bytes: int) -> float | None:
    """Multiply-adds x 2 for the ops whose cost follows from their input shapes; None when unknown."""
    try:
        if op == "Linear" and len(shapes) >= 2:
            x, w = shapes[0], shapes[1]
            return 2.0 * math.prod(x[:-1]) * w[0] * w[1]
        if op == "MatMul" and len(shapes) == 2 and len(shapes[0]) >= 2 and len(shapes[1]) >= 2:
            a, b = shapes
            batch = np.broadcast_shapes(a[:-2], b[:-2])
            return 2.0 * math.prod(batch) * a[-2] * a[-1] * b[-1]
        if op == "Conv2d" and len(shapes) >= 2 and dtypes:
            w = shapes[1]
            itemsize = _ITEMSIZE.get(dtypes[0]) or _ITEMSIZE.setdefault(dtypes[0], np.dtype(dtypes[0]).itemsize)
            output_elements = output_bytes // itemsize
            return 2.0 * output_elements * w[1] * w[2] * w[3]
    except (IndexError, ValueError, TypeError):
        return None
    return None


def build_trace(recorder: Recorder, schedule: dict[str, int] | None = None) -> dict[str, Any]:
    """The trace of what ``recorder`` holds: ops, derived module spans, spans and memory counters."""
    with gc_paused():  # thousands of small acyclic dicts: a collection would only walk them again
        return _build_trace(recorder, schedule)


def _build_trace(recorder: Recorder, schedule: dict[str, int] | None) -> dict[str, Any]:
    pid, host_tid = os.getpid(), fmt.TID_HOST
    ops, spans, memory = recorder.decoded()
    starts = ([op.start_ns for op in ops[:1]] + [s[2] for s in spans[:1]] + [c[3] for c in recorder.comm[:1]]
              + [w[1] for w in recorder.comm_waits[:1]] + [recorder.started_ns])
    base_ns = min(starts)
    wall_at_zero = time.time() - (time.perf_counter_ns() - base_ns) / 1e9

    def us(ns: int) -> float:
        return (ns - base_ns) / 1000.0

    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"flowscope {socket.gethostname()}"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": host_tid, "args": {"name": "training thread"}},
    ]
    stacks = recorder.stacks if len(recorder.stacks) == len(ops) else None
    # NOTE: an op's event and args differ from those of the previous op with the same key only in times, step, stack
    # and node: each is a copy of a template built once per key (no flops_of, no shape formatting per op)
    templates: dict[tuple, tuple[dict[str, Any], dict[str, Any]]] = {}
    for index, op in enumerate(ops):
        key = (op.op, op.phase, op.module, op.input_shapes, op.input_dtypes, op.output_bytes)
        template = templates.get(key)
        if template is None:
            template = templates[key] = _op_templates(op, pid, host_tid)
        event, args = template[0].copy(), template[1].copy()
        args[fmt.ARG_STEP] = op.step
        if stacks is not None:
            args[fmt.ARG_STACK] = list(stacks[index])
        if op.node is not None:
            args[fmt.ARG_NODE] = op.node
        event["ts"], event["dur"] = (op.start_ns - base_ns) / 1000.0, (op.end_ns - op.start_ns) / 1000.0
        event["args"] = args
        events.append(event)
    for path, phase, step, start, end in module_spans(ops):
        events.append({"ph": "X", "cat": fmt.CAT_MODULE, "name": path, "ts": us(start), "dur": (end - start) / 1000.0,
                       "pid": pid, "tid": host_tid, "args": {fmt.ARG_STEP: step, fmt.ARG_PHASE: phase}})
    for category, name, start, end, step in spans:
        events.append({"ph": "X", "cat": category, "name": name, "ts": us(start), "dur": (end - start) / 1000.0,
                       "pid": pid, "tid": host_tid, "args": {fmt.ARG_STEP: step}})
    kernels = recorder.kernels
    if kernels:
        events.extend(kernel_events(ops, kernels, us, pid))
    events.extend(comm_events(recorder.comm, recorder.comm_waits, us, pid))
    counter_keys: dict[str, tuple[str, str]] = {}  # device -> its two counter names
    for time_ns, device, allocated in memory:
        keys = counter_keys.get(device)
        if keys is None:
            keys = counter_keys[device] = (f"{device}.allocated", f"{device}.reserved")
        events.append({"ph": "C", "name": fmt.COUNTER_MEMORY, "ts": (time_ns - base_ns) / 1000.0, "pid": pid,
                       "args": {keys[0]: allocated, keys[1]: allocated}})
    metadata = {"writer": "flowscope", "format_version": fmt.FORMAT_VERSION, "engine_version": engine.__version__,
                "devices": ["cpu", "cuda"] if kernels else ["cpu"], "host": socket.gethostname(), "pid": pid,
                "rank": trace_rank(),
                "schedule": schedule or {}, "wall_time_at_ts_zero": wall_at_zero,
                "steps": sorted({s[4] for s in spans if s[0] == fmt.CAT_STEP})}
    return {"traceEvents": events, "displayTimeUnit": "ms", "metadata": metadata}


def _op_templates(op: OpRecord, pid: int, tid: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The event and args of ``op`` with placeholders for what differs per execution (times, step)."""
    shapes, dtypes = op.input_shapes, op.input_dtypes
    args: dict[str, Any] = {fmt.ARG_STEP: -1, fmt.ARG_MODULE: op.module, fmt.ARG_PHASE: op.phase,
                            fmt.ARG_SHAPES: fmt.format_shapes(shapes), fmt.ARG_DTYPE: ",".join(dtypes),
                            fmt.ARG_BYTES: op.output_bytes}
    flops = flops_of(op.op, shapes, dtypes, op.output_bytes) if shapes else None
    if flops is not None:
        args[fmt.ARG_FLOPS] = flops
    event = {"ph": "X", "cat": fmt.CAT_OP, "name": op.op, "ts": 0.0, "dur": 0.0, "pid": pid, "tid": tid, "args": None}
    return event, args


def module_spans(ops: list[OpRecord]) -> list[tuple[str, str, int, int, int]]:
    """(path, phase, step, start_ns, end_ns) for every run of consecutive ops under one module path prefix.

    A run ends where the next op lies outside the module, or the phase or step changes: forward and backward
    visits of a layer are separate spans (backward ops carry the module of their forward op). A span ends where
    the last op of its run ends."""
    spans: list[tuple[str, str, int, int, int]] = []
    open_chain: list[tuple[str, int]] = []  # (path, start_ns) from outermost to innermost, all of open_phase/step
    open_phase, open_step, last_chain, last_end = None, None, None, 0
    for record in ops:
        phase, step = record.phase, record.step
        chain = _ancestors(record.module)
        same_run = phase == open_phase and step == open_step
        if same_run and chain is last_chain:  # the same module as the op before: every open span goes on
            last_end = record.end_ns
            continue
        keep = 0
        if same_run:
            limit = min(len(open_chain), len(chain))
            while keep < limit and open_chain[keep][0] == chain[keep]:
                keep += 1
        for path, start in reversed(open_chain[keep:]):
            spans.append((path, open_phase, open_step, start, last_end))
        del open_chain[keep:]
        for path in chain[keep:]:
            open_chain.append((path, record.start_ns))
        open_phase, open_step, last_chain, last_end = phase, step, chain, record.end_ns
    for path, start in reversed(open_chain):
        spans.append((path, open_phase, open_step, start, last_end))
    return spans


def _ancestors(module: str) -> list[str]:
    """``"a.b.c"`` -> ``["a", "a.b", "a.b.c"]`` (memoized: a capture has few module paths and many ops)."""
    chain = _chains.get(module)
    if chain is None:
        parts = module.split(".") if module else []
        chain = _chains[module] = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return chain


_chains: dict[str, list[str]] = {}


def write_capture(run_dir: str | os.PathLike[str], trace: dict[str, Any], sidecar: bool = True) -> str:
    """Write ``trace`` as a new capture of ``run_dir``; returns the trace file's path.

    With ``sidecar``, its columns go first to ``<host>.<pid>.columns.npz`` (the board then skips the JSON parse);
    a failure there is reported once and the trace is written all the same."""
    capture_dir = fmt.new_capture_dir(run_dir)
    path = os.path.join(capture_dir, fmt.trace_file_name())
    data = fmt.encode_trace(trace)
    if sidecar:
        try:
            trace_sidecar.write_sidecar(trace_sidecar.sidecar_path(path), columns_from_trace(trace), data)
        except Exception as error:  # noqa: BLE001 - the sidecar is an optimisation: never lose the trace for it
            _report_sidecar_failure(path, error)
    fmt.write_trace(path, data)
    return path


_reported: set[str] = set()


def _report_sidecar_failure(path: str, error: Exception) -> None:
    kind = type(error).__name__
    if kind not in _reported:
        _reported.add(kind)
        print(f"flowscope: no columns sidecar for {path} ({kind}: {error}); the board will parse the trace",
              file=sys.stderr)
