"""A Chrome trace (flowscope's or torch.profiler's) as numpy columns of typed events: ops, spans and counters."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from instrumentation.format.gcpause import gc_paused
from instrumentation.format import trace as fmt
from instrumentation.format.trace_torch import (FLOW_FWDBWD, MODULE_PREFIX, PYTHON_CAT, backward_ops, flow_targets,
                                                inclusive_bytes, kernel_phases, launches, memory_events,
                                                merged_into_parent, module_paths, op_memory, owners)

_EMPTY: dict[str, Any] = {}
# torch.profiler categories and names mapped onto ours.
_TORCH_OP_CATS = {"cpu_op", "operator"}
_TORCH_KERNEL_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_TORCH_STEP = "ProfilerStep#"
_TORCH_OPTIMIZER = ("Optimizer.step#", "Optimizer.zero_grad#")
_TORCH_DATA = "enumerate(DataLoader)#"


@dataclass(frozen=True)
class OpColumns:
    """One row per op execution (host or kernel); strings are codes into the tuples beside them."""

    name: np.ndarray          # int32 codes into names
    names: tuple[str, ...]
    category: np.ndarray      # int8: 0 host op, 1 kernel
    ts_us: np.ndarray         # float64 start
    dur_us: np.ndarray        # float64 duration
    self_us: np.ndarray       # duration minus the durations of ops nested directly inside (torch nests ops)
    tid: np.ndarray           # int64
    step: np.ndarray          # int64, -1 when unknown
    module: np.ndarray        # int32 codes into modules ("" when unknown)
    modules: tuple[str, ...]
    phase: np.ndarray         # int8 index into fmt.PHASES
    shapes: np.ndarray        # int32 codes into shape strings
    shape_strings: tuple[str, ...]
    bytes: np.ndarray         # int64 output bytes allocated (0 when unknown); torch: the op's own [memory] allocations
    flops: np.ndarray         # float64, NaN when unknown
    freed_bytes: np.ndarray   # int64 bytes the op itself freed (torch's [memory] events; 0 when unknown)
    # torch's [memory] events: the net bytes (allocated minus freed) of the op and every op nested in it, torch's
    # "CPU Mem" (the op's own net, "Self CPU Mem", is bytes - freed_bytes). None when the trace records no frees.
    total_net_bytes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ts_us)


@dataclass(frozen=True)
class SpanColumns:
    """Steps, modules, data waits, optimizer, log and user spans: ``category`` is an index into SPAN_CATEGORIES."""

    category: np.ndarray  # int8
    name: tuple[str, ...]
    ts_us: np.ndarray
    dur_us: np.ndarray
    step: np.ndarray      # int64: the step number for step spans, the step a span falls in otherwise (-1 unknown)

    def of(self, category: str) -> np.ndarray:
        return np.flatnonzero(self.category == fmt.SPAN_CATEGORIES.index(category))


@dataclass(frozen=True)
class TraceColumns:
    ops: OpColumns
    spans: SpanColumns
    memory_ts_us: np.ndarray
    memory_bytes: np.ndarray  # allocated bytes summed over devices at each counter sample
    metadata: dict[str, Any]
    source: str  # "flowscope" | "torch" | "chrome"


def _codes(values: list[str], first: tuple[str, ...] = ()) -> tuple[np.ndarray, tuple[str, ...]]:
    """Factorize strings: int32 codes and the distinct values (``first`` ones get the lowest codes, the others in
    order of first appearance: the same codes in every process, unlike set order under hash randomization)."""
    table = {value: i for i, value in enumerate(first)}
    for value in dict.fromkeys(values):
        table.setdefault(value, len(table))
    return np.array(list(map(table.__getitem__, values)), dtype=np.int32), tuple(table)


def columns_from_trace(trace: dict[str, Any]) -> TraceColumns:
    """Typed columns from a loaded trace; unknown event kinds are skipped."""
    with gc_paused():
        return _columns(trace)


def _columns(trace: dict[str, Any]) -> TraceColumns:
    events = trace.get("traceEvents") or []
    metadata = trace.get("metadata") if isinstance(trace.get("metadata"), dict) else {}
    torch_like = "schemaVersion" in trace or any(k in trace for k in ("deviceProperties", "distributedInfo"))
    source = "flowscope" if metadata.get("writer") == "flowscope" else ("torch" if torch_like else "chrome")
    complete = [e for e in events if type(e) is dict and e.get("ph") == "X"]
    ops, spans = _split(complete, source)
    spans.extend(_torch_modules(complete) if source != "flowscope" else ())
    counters = [e for e in events if type(e) is dict and e.get("ph") == "C" and e.get("name") == fmt.COUNTER_MEMORY]
    memory_ts = np.array([e.get("ts", 0.0) for e in counters], dtype=np.float64)
    memory_bytes = _allocated_bytes([e.get("args") or _EMPTY for e in counters])
    span_columns = _span_columns(spans)
    if source == "flowscope":
        return TraceColumns(_op_columns(ops, span_columns), span_columns, memory_ts, memory_bytes, metadata, source)
    memory = memory_events(events, _thread_id)  # torch.profiler(profile_memory=True)
    op_columns = _op_columns(ops, span_columns, memory=memory, flow_ends=flow_targets(events, FLOW_FWDBWD, _thread_id),
                             launched=launches(events, _thread_id), modules=_modules_of(ops, spans))
    if len(memory) and not len(counters):
        memory_ts, memory_bytes = memory.ts_us, memory.total_bytes
    op_columns = _fold_duplicates(op_columns)
    return TraceColumns(op_columns, span_columns, memory_ts, memory_bytes, metadata, source)


def _thread_id(event: dict) -> int:
    tid = event.get("tid", 0)
    return tid if type(tid) is int else hash(tid)


def _allocated_bytes(args: list[dict]) -> np.ndarray:
    """Per counter sample, the ``<device>.allocated`` values summed over devices."""
    keys = sorted({key for a in args[:1] + args[-1:] for key in a if key.endswith(".allocated")})
    total = np.zeros(len(args), dtype=np.int64)
    for key in keys:
        total += np.array([a.get(key, 0) for a in args], dtype=np.int64)
    if any(len(a) != 2 * len(keys) for a in args[:: max(1, len(args) // 64)]):  # devices vary: the general path
        total = np.array([sum(v for k, v in a.items() if k.endswith(".allocated")) for a in args], dtype=np.int64)
    return total


def _split(complete: list[dict], source: str) -> tuple[list[dict], list[tuple[int, str, dict]]]:
    """Ops and (category index, name, event) spans, with torch's categories and names mapped onto ours."""
    index = fmt.SPAN_CATEGORIES.index
    if source == "flowscope":
        op_cats = (fmt.CAT_OP, fmt.CAT_KERNEL)
        ops = [e for e in complete if e.get("cat") in op_cats]
        spans = [(index(e["cat"]), str(e.get("name", "")), e) for e in complete if e.get("cat") in fmt.SPAN_CATEGORIES]
        return ops, spans
    ops, spans = [], []
    for event in complete:
        cat, name = event.get("cat", ""), str(event.get("name", ""))
        if cat in _TORCH_OP_CATS or cat in _TORCH_KERNEL_CATS or cat in (fmt.CAT_OP, fmt.CAT_KERNEL):
            ops.append(event)
        elif name.startswith(_TORCH_STEP):
            spans.append((index(fmt.CAT_STEP), "step " + name[len(_TORCH_STEP):], event))
        elif name.startswith(_TORCH_OPTIMIZER) and cat != PYTHON_CAT:
            spans.append((index(fmt.CAT_OPTIMIZER), name, event))
        elif name.startswith(_TORCH_DATA) and cat != PYTHON_CAT:
            spans.append((index(fmt.CAT_DATA), name, event))
        elif cat == "user_annotation" or cat in fmt.SPAN_CATEGORIES:
            spans.append((index(cat) if cat in fmt.SPAN_CATEGORIES else index(fmt.CAT_USER), name, event))
    return ops, spans


def _torch_modules(complete: list[dict]) -> list[tuple[int, str, dict]]:
    """torch's ``nn.Module:`` events (``with_stack=True``) as module spans named by their path (trace_torch)."""
    found = [e for e in complete if e.get("cat") == PYTHON_CAT and str(e.get("name", "")).startswith(MODULE_PREFIX)]
    if not found:
        return []
    paths = module_paths([e["name"] for e in found], *_intervals(found))
    return [(fmt.SPAN_CATEGORIES.index(fmt.CAT_MODULE), path, e) for path, e in zip(paths, found)]


def _intervals(events: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([float(e.get("ts", 0.0)) for e in events], dtype=np.float64),
            np.array([float(e.get("dur", 0.0)) for e in events], dtype=np.float64),
            np.array([_thread_id(e) for e in events], dtype=np.int64))


def _modules_of(ops: list[dict], spans: list[tuple[int, str, dict]]) -> list[str] | None:
    """Each torch op's innermost module span on its thread ("" outside every module); None without module spans."""
    index = fmt.SPAN_CATEGORIES.index(fmt.CAT_MODULE)
    modules = [(name, e) for category, name, e in spans if category == index]
    if not modules:
        return None
    owner = owners(*_intervals([e for _, e in modules]), *_intervals(ops)[::2])
    return [modules[i][0] if i >= 0 else "" for i in owner.tolist()]


def _span_columns(spans: list[tuple[int, str, dict]]) -> SpanColumns:
    category = np.array([c for c, _, _ in spans], dtype=np.int8)
    ts = np.array([float(e.get("ts", 0.0)) for _, _, e in spans], dtype=np.float64)
    dur = np.array([float(e.get("dur", 0.0)) for _, _, e in spans], dtype=np.float64)
    names = tuple(n for _, n, _ in spans)
    step = np.array([(e.get("args") or _EMPTY).get(fmt.ARG_STEP, -1) for _, _, e in spans], dtype=np.int64)
    for i in np.flatnonzero((step < 0) & (category == 0)).tolist():  # torch: "ProfilerStep#7" -> "step 7"
        number = names[i][5:]
        step[i] = int(number) if number.isdigit() else -1
    columns = SpanColumns(category, names, ts, dur, step)
    unknown = step < 0
    if unknown.any():
        step[unknown] = _steps_at(columns, ts[unknown])
    return columns


def _steps_at(spans: SpanColumns, ts_us: np.ndarray) -> np.ndarray:
    """The number of the step span containing each time (-1 outside every step)."""
    steps = spans.of(fmt.CAT_STEP)
    if len(steps) == 0:
        return np.full(len(ts_us), -1, dtype=np.int64)
    order = steps[np.argsort(spans.ts_us[steps], kind="stable")]
    starts, ends = spans.ts_us[order], spans.ts_us[order] + spans.dur_us[order]
    slot = np.searchsorted(starts, ts_us, side="right") - 1
    inside = (slot >= 0) & (ts_us <= ends[np.maximum(slot, 0)])
    return np.where(inside, spans.step[order][np.maximum(slot, 0)], -1)


def _op_columns(ops: list[dict], spans: SpanColumns, memory=None, flow_ends: set | None = None,
                launched: dict | None = None, modules: list[str] | None = None) -> OpColumns:
    args = [e.get("args") or _EMPTY for e in ops]
    name_codes, names = _codes([str(e.get("name", "")) for e in ops])
    kernel_cats = _TORCH_KERNEL_CATS | {fmt.CAT_KERNEL}
    category = np.array([e.get("cat") in kernel_cats for e in ops], dtype=np.int8)
    ts = np.array([e.get("ts", 0.0) for e in ops], dtype=np.float64)
    dur = np.array([e.get("dur", 0.0) for e in ops], dtype=np.float64)
    tid = np.array([_thread_id(e) for e in ops], dtype=np.int64)
    module, module_names = _codes(modules if modules is not None else [a.get(fmt.ARG_MODULE) or "" for a in args],
                                  first=("",))
    shapes, shape_strings = _codes([_shape_text(a) for a in args])
    nbytes = np.array([a.get(fmt.ARG_BYTES) or 0 for a in args], dtype=np.int64)
    flops = np.array([a.get(fmt.ARG_FLOPS, np.nan) for a in args], dtype=np.float64)
    phase_index = {p: i for i, p in enumerate(fmt.PHASES)}
    phase = np.array([phase_index.get(a.get(fmt.ARG_PHASE), -1) for a in args], dtype=np.int8)
    step = np.array([a.get(fmt.ARG_STEP, -1) for a in args], dtype=np.int64)
    if len(ops) and (step < 0).any():
        step = np.where(step < 0, _steps_at(spans, ts), step)
    if len(ops) and (phase < 0).any():
        backward = backward_ops(names, name_codes, args, ts, dur, tid, flow_ends or set())
        phase = np.where(phase < 0, _torch_phase(backward, ts, spans), phase).astype(np.int8)
        if launched:  # device ops take the phase of the host op that launched them
            phase = kernel_phases(args, category == 1, ts, dur, tid, phase, launched)
    freed, total_net = np.zeros(len(ops), dtype=np.int64), None
    if memory is not None and len(memory):
        allocated, freed = op_memory(ts, dur, tid, memory)
        nbytes = np.where(nbytes == 0, allocated, nbytes)
        total_net = inclusive_bytes(nbytes - freed, ts, dur, tid)
    return OpColumns(name_codes, names, category, ts, dur, _self_times(ts, dur, tid), tid, step, module, module_names,
                     phase, shapes, shape_strings, nbytes, flops, freed, total_net)


def _fold_duplicates(ops: OpColumns) -> OpColumns:
    """torch's key_averages counts an op nested alone in an op of the same name as that op (trace_torch): fold its
    self time and own bytes into the holder and drop its row, so that calls and self numbers are torch's."""
    host = np.flatnonzero(ops.category == 0)
    into = merged_into_parent(ops.name[host], ops.ts_us[host], ops.dur_us[host], ops.tid[host])
    folded = np.flatnonzero(into >= 0)
    if not len(folded):
        return ops
    rows, targets = host[folded], host[into[folded]]
    sums = {}
    for name in ("self_us", "bytes", "freed_bytes"):
        values = getattr(ops, name).copy()
        np.add.at(values, targets, values[rows])
        sums[name] = values
    keep = np.ones(len(ops), dtype=bool)
    keep[rows] = False
    arrays = {f.name: getattr(ops, f.name) for f in fields(ops)}
    arrays.update(sums)
    return OpColumns(**{name: value[keep] if isinstance(value, np.ndarray) else value
                        for name, value in arrays.items()})


def _shape_text(args: dict) -> str:
    value = args.get(fmt.ARG_SHAPES)
    if type(value) is str:
        return value
    dims = args.get("Input Dims")  # torch.profiler with record_shapes=True
    if isinstance(dims, list):
        return fmt.format_shapes(tuple(tuple(d) if isinstance(d, list) else () for d in dims))
    return ""


def _torch_phase(backward: np.ndarray, ts: np.ndarray, spans: SpanColumns) -> np.ndarray:
    """Backward for the ops autograd ran (trace_torch.backward_ops), optimizer inside an optimizer span (step and
    zero_grad), data inside a data span (``enumerate(DataLoader)#…``: the loader's work is input, not forward)."""
    phase = np.where(backward, fmt.PHASES.index("backward"), fmt.PHASES.index("forward")).astype(np.int8)
    for category, name in ((fmt.CAT_OPTIMIZER, "optimizer"), (fmt.CAT_DATA, "data")):
        rows = spans.of(category)
        for start, duration in zip(spans.ts_us[rows], spans.dur_us[rows]):
            phase[(ts >= start) & (ts <= start + duration)] = fmt.PHASES.index(name)
    return phase


def _self_times(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Duration minus direct children on the same thread. flowscope's ops never nest: the fast path."""
    self_us = dur.copy()
    if len(ts) < 2:
        return self_us
    order = np.lexsort((-dur, ts, tid))
    same = tid[order][1:] == tid[order][:-1]
    ends = (ts + dur)[order]
    if not (same & (ts[order][1:] < ends[:-1])).any():
        return self_us
    stack: list[int] = []  # NOTE: nesting exists (torch): one pass with a stack of open ops per thread
    for i in order.tolist():
        while stack and (tid[stack[-1]] != tid[i] or ts[i] >= ts[stack[-1]] + dur[stack[-1]]):
            stack.pop()
        if stack:
            self_us[stack[-1]] -= dur[i]
        stack.append(i)
    return np.maximum(self_us, 0.0)
