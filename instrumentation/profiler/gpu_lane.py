"""The GPU side of a capture: kernel events on one lane per CUDA stream, a flow from each op to its kernels, and
GPU busy time per step for the ``input_bound`` rule."""
from __future__ import annotations

from typing import Any, Callable

import engine
from instrumentation.format import gpu_time
from instrumentation.format import trace as fmt


def device_timer() -> Any:
    """The engine's CUDA kernel timer (``engine.cuda.kernel_timer()``), or None without CuPy, a device or the
    engine's CUDA API."""
    make = getattr(getattr(engine, "cuda", None), "kernel_timer", None)
    if make is None:
        return None
    try:
        return make()
    except Exception:  # noqa: BLE001 - profiling works without GPU time
        return None


def kernel_events(ops: list[Any], kernels: list[tuple], us: Callable[[int], float], pid: int) -> list[dict]:
    """Chrome trace events for ``kernels`` — ``(op index, stream, start_ns, end_ns)`` records, the op index into
    ``ops`` (the recorder's ``engine.op_log.OpRecord``s) — : one ``X``
    event of category ``kernel`` per op and stream (named as the op, with its step, module, phase and shapes), a
    lane per stream, and an ``s``/``f`` flow pair from the op's start to its kernels' start."""
    lanes: dict[int, int] = {}
    events: list[dict] = []
    for flow_id, (index, stream, start_ns, end_ns) in enumerate(kernels, start=1):
        if not 0 <= index < len(ops):
            continue
        record = ops[index]
        shapes = record.input_shapes
        tid = lanes.get(stream)
        if tid is None:
            tid = lanes[stream] = gpu_time.GPU_TID_BASE + len(lanes)
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": f"GPU stream {stream}"}})
        events.append({"ph": "X", "cat": fmt.CAT_KERNEL, "name": record.op, "ts": us(start_ns),
                       "dur": (end_ns - start_ns) / 1000.0, "pid": pid, "tid": tid,
                       "args": {fmt.ARG_STEP: record.step, fmt.ARG_MODULE: record.module, fmt.ARG_PHASE: record.phase,
                                fmt.ARG_SHAPES: fmt.format_shapes(shapes) if shapes else "",
                                fmt.ARG_DTYPE: ",".join(record.input_dtypes), gpu_time.ARG_STREAM: stream}})
        flow = {"cat": gpu_time.FLOW_CAT, "name": gpu_time.FLOW_NAME, "id": flow_id, "pid": pid}
        events.append({**flow, "ph": "s", "ts": us(record.start_ns), "tid": fmt.TID_HOST})
        events.append({**flow, "ph": "f", "bp": "e", "ts": us(start_ns), "tid": tid})
    return events


def gpu_busy_ns(kernels: list[tuple]) -> int:
    """Time at least one of ``kernels`` (``(op index, stream, start_ns, end_ns)``) ran."""
    if not kernels:
        return 0
    return int(round(gpu_time.busy_us([k[2] for k in kernels], [k[3] for k in kernels])))
