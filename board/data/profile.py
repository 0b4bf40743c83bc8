"""Analyses of one capture: step-time breakdown, top ops, and the timeline of one step (no dash/plotly here)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instrumentation.format import gpu_time
from instrumentation.format import trace as fmt
from instrumentation.format.trace_columns import TraceColumns
from instrumentation.format.trace_stats import OpStat, op_stats

BREAKDOWN_PARTS = ("data", "forward", "backward", "optimizer", "comm_wait", "log", "other")
PART_LABELS = {"comm_wait": "waiting on other ranks"}  # how a part is named where its key says too little
OPS_LANE, SPANS_LANE, STEP_LANE = "ops", "spans", "step"
GPU_LANE = "gpu"  # the kernels of the step's ops (device time), below the host ops


@dataclass(frozen=True)
class StepBreakdown:
    """Per step, milliseconds in each of BREAKDOWN_PARTS.

    ``forward``/``backward``: self time of the host ops of that phase (torch: the DataLoader's ops are data, not
    forward); ``optimizer``: the optimizer spans (or the optimizer-phase ops when there are none); ``data``/``log``:
    those spans; ``comm_wait``: data-parallel training waiting for the other ranks' gradients (the ``comm_wait``
    spans); ``other``: the rest of the step (Python between ops), never negative. No time is in two parts."""

    steps: np.ndarray  # int64 step numbers, ascending
    step_ms: np.ndarray
    parts_ms: dict[str, np.ndarray]
    # With device time (kernel events): per step, the time at least one kernel ran inside the step span, and the
    # rest of the step (the GPU idle). None without kernels.
    gpu_busy_ms: np.ndarray | None = None
    gpu_idle_ms: np.ndarray | None = None

    @classmethod
    def empty(cls) -> StepBreakdown:
        return cls(np.zeros(0, np.int64), np.zeros(0), {part: np.zeros(0) for part in BREAKDOWN_PARTS})


def step_breakdown(columns: TraceColumns) -> StepBreakdown:
    spans, ops = columns.spans, columns.ops
    step_rows = spans.of(fmt.CAT_STEP)
    order = step_rows[np.argsort(spans.step[step_rows], kind="stable")]
    steps, step_ms = spans.step[order], spans.dur_us[order] / 1e3
    position = np.searchsorted(steps, steps)  # NOTE: step numbers are unique and sorted: searchsorted maps them

    def per_step(step_numbers: np.ndarray, values_us: np.ndarray) -> np.ndarray:
        if not len(steps):
            return np.zeros(0)
        index = np.clip(np.searchsorted(steps, step_numbers), 0, len(steps) - 1)
        keep = steps[index] == step_numbers
        return np.bincount(position[index[keep]], values_us[keep], minlength=len(steps)) / 1e3

    def span_ms(category: str) -> np.ndarray:
        rows = spans.of(category)
        return per_step(spans.step[rows], spans.dur_us[rows])

    def op_ms(phase: str) -> np.ndarray:
        rows = np.flatnonzero((ops.category == 0) & (ops.phase == fmt.PHASES.index(phase)))
        return per_step(ops.step[rows], ops.self_us[rows])

    def nested_ms(inner: str, outer: str) -> np.ndarray:
        """Per step (the step of the enclosing span), the time of ``inner`` spans that lie inside an ``outer`` span
        (spans of one category do not overlap one another)."""
        outer_rows, inner_rows = spans.of(outer), spans.of(inner)
        if not len(outer_rows) or not len(inner_rows):
            return np.zeros(len(steps))
        outer_rows = outer_rows[np.argsort(spans.ts_us[outer_rows], kind="stable")]
        starts, ends = spans.ts_us[outer_rows], spans.ts_us[outer_rows] + spans.dur_us[outer_rows]
        inner_start = spans.ts_us[inner_rows]
        slot = np.searchsorted(starts, inner_start, side="right") - 1
        inside = (slot >= 0) & (inner_start + spans.dur_us[inner_rows] <= ends[np.maximum(slot, 0)])
        return per_step(spans.step[outer_rows[slot[inside]]], spans.dur_us[inner_rows[inside]])

    # NOTE: log time is what lies inside the step (step-end observers run after it); instrumentation inside the
    # optimizer span (an optimizer_step_begin observer such as watch()) is log time, not optimizer time
    optimizer_span = (span_ms(fmt.CAT_OPTIMIZER) - nested_ms(fmt.CAT_LOG, fmt.CAT_OPTIMIZER)
                      - nested_ms(fmt.CAT_COMM_WAIT, fmt.CAT_OPTIMIZER))
    parts = {"data": span_ms(fmt.CAT_DATA), "forward": op_ms("forward"), "backward": op_ms("backward"),
             "optimizer": np.where(optimizer_span > 0, optimizer_span, op_ms("optimizer")),
             "comm_wait": nested_ms(fmt.CAT_COMM_WAIT, fmt.CAT_STEP), "log": nested_ms(fmt.CAT_LOG, fmt.CAT_STEP)}
    covered = np.sum(list(parts.values()), axis=0) if len(steps) else np.zeros(0)
    parts["other"] = np.maximum(step_ms - covered, 0.0)
    busy = _gpu_busy_ms(columns, order)
    return StepBreakdown(steps, step_ms, parts, busy, None if busy is None else np.maximum(step_ms - busy, 0.0))


def _gpu_busy_ms(columns: TraceColumns, step_rows: np.ndarray) -> np.ndarray | None:
    """Per step span (in ``step_rows`` order), the union of the kernel intervals inside it; None without kernels."""
    ops, spans = columns.ops, columns.spans
    kernels = np.flatnonzero(ops.category == 1)
    if not len(kernels):
        return None
    starts, ends = ops.ts_us[kernels], ops.ts_us[kernels] + ops.dur_us[kernels]
    return np.array([gpu_time.busy_us(starts, ends, spans.ts_us[i], spans.ts_us[i] + spans.dur_us[i])
                     for i in step_rows.tolist()]) / 1e3


def top_ops(columns: TraceColumns, group_by: str = "op", sort_by: str = "self_us") -> list[OpStat]:
    return op_stats(columns, group_by, sort_by)


@dataclass(frozen=True)
class Timeline:
    """Bars of one step, times in ms from the step's start. ``lanes`` top to bottom; ``kind`` colours a bar:
    a phase for ops and modules, the span category otherwise."""

    step: int
    lanes: tuple[str, ...]
    lane: np.ndarray      # int index into lanes
    start_ms: np.ndarray
    duration_ms: np.ndarray
    name: tuple[str, ...]
    kind: tuple[str, ...]
    detail: tuple[str, ...]

    @classmethod
    def empty(cls, step: int = 0) -> Timeline:
        return cls(step, (), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), (), (), ())


def step_timeline(columns: TraceColumns, step: int) -> Timeline:
    """The step span, its data/optimizer/log/user spans, modules by depth (outermost first), host ops and, with
    device time, the ops' kernels."""
    spans, ops = columns.spans, columns.ops
    step_rows = [i for i in spans.of(fmt.CAT_STEP).tolist() if spans.step[i] == step]
    if step_rows:
        origin, end = spans.ts_us[step_rows[0]], spans.ts_us[step_rows[0]] + spans.dur_us[step_rows[0]]
    else:
        in_step = ops.step == step
        origin = ops.ts_us[in_step].min() if in_step.any() else 0.0
        end = (ops.ts_us + ops.dur_us)[in_step].max() if in_step.any() else 0.0
    rows: list[tuple[str, float, float, str, str, str]] = []
    for i in step_rows:
        rows.append((STEP_LANE, spans.ts_us[i], spans.dur_us[i], spans.name[i], fmt.CAT_STEP, ""))
    inside = (spans.ts_us >= origin) & (spans.ts_us <= end)
    for category in (fmt.CAT_DATA, fmt.CAT_OPTIMIZER, fmt.CAT_COMM_WAIT, fmt.CAT_LOG, fmt.CAT_USER):
        for i in np.flatnonzero(inside & (spans.category == fmt.SPAN_CATEGORIES.index(category))).tolist():
            rows.append((SPANS_LANE, spans.ts_us[i], spans.dur_us[i], spans.name[i], category, ""))
    step_ops = np.flatnonzero((ops.step == step) & (ops.category == 0))
    step_ops = step_ops[np.argsort(ops.ts_us[step_ops], kind="stable")]
    for i in np.flatnonzero(inside & (spans.category == fmt.SPAN_CATEGORIES.index(fmt.CAT_MODULE))).tolist():
        first = np.searchsorted(ops.ts_us[step_ops], spans.ts_us[i])  # a module span's phase: its first op's
        phase = ops.phase[step_ops[first]] if first < len(step_ops) else 0
        rows.append((f"module {spans.name[i].count('.') + 1}", spans.ts_us[i], spans.dur_us[i], spans.name[i],
                     fmt.PHASES[phase], ""))
    for i in step_ops.tolist():
        detail = f"{ops.modules[ops.module[i]] or '(model)'} · {ops.shape_strings[ops.shapes[i]]}"
        rows.append((OPS_LANE, ops.ts_us[i], ops.dur_us[i], ops.names[ops.name[i]], fmt.PHASES[ops.phase[i]], detail))
    for i in np.flatnonzero((ops.step == step) & (ops.category == 1)).tolist():
        detail = f"GPU · {ops.modules[ops.module[i]] or '(model)'} · {ops.shape_strings[ops.shapes[i]]}"
        rows.append((GPU_LANE, ops.ts_us[i], ops.dur_us[i], ops.names[ops.name[i]], fmt.PHASES[ops.phase[i]], detail))
    depths = sorted({r[0] for r in rows if r[0].startswith("module ")}, key=lambda lane: int(lane.split()[1]))
    lanes = tuple(lane for lane in (STEP_LANE, SPANS_LANE, *depths, OPS_LANE, GPU_LANE)
                  if any(r[0] == lane for r in rows))
    index = {lane: i for i, lane in enumerate(lanes)}
    return Timeline(step, lanes, np.array([index[r[0]] for r in rows], dtype=np.int64),
                    (np.array([r[1] for r in rows], dtype=np.float64) - origin) / 1e3,
                    np.array([r[2] for r in rows], dtype=np.float64) / 1e3,
                    tuple(r[3] for r in rows), tuple(r[4] for r in rows), tuple(r[5] for r in rows))


@dataclass(frozen=True)
class MemoryCurve:
    """Allocated bytes (summed over devices) at each memory sample of a capture — torch's ``[memory]`` events
    (``profile_memory=True``: one per allocation or free) or flowscope's memory counters — with the capture's
    steps, times in ms from the capture's first event."""

    time_ms: np.ndarray
    allocated_bytes: np.ndarray
    step_start_ms: np.ndarray
    step_end_ms: np.ndarray
    steps: np.ndarray
    every_change: bool  # one sample per allocation and free (torch): the value holds until the next sample

    def __len__(self) -> int:
        return len(self.time_ms)


def memory_curve(columns: TraceColumns) -> MemoryCurve:
    spans = columns.spans
    step_rows = spans.of(fmt.CAT_STEP)
    step_rows = step_rows[np.argsort(spans.ts_us[step_rows], kind="stable")]
    starts = [columns.memory_ts_us, spans.ts_us[step_rows], columns.ops.ts_us]
    origin = min((float(a.min()) for a in starts if len(a)), default=0.0)
    return MemoryCurve((columns.memory_ts_us - origin) / 1e3, columns.memory_bytes.copy(),
                       (spans.ts_us[step_rows] - origin) / 1e3,
                       (spans.ts_us[step_rows] + spans.dur_us[step_rows] - origin) / 1e3, spans.step[step_rows].copy(),
                       columns.source == "torch")
