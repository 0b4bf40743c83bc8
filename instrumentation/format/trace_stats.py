"""Op statistics of a trace grouped by op, module or input shape: the numbers behind key_averages and the board."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instrumentation.format import trace as fmt
from instrumentation.format.trace_columns import TraceColumns

GROUP_BY = ("op", "module", "shape")
SORT_KEYS = ("self_us", "total_us", "calls", "mean_us", "bytes", "flops", "cuda_us", "self_net_bytes",
             "total_net_bytes")


@dataclass(frozen=True, slots=True)
class OpStat:
    """One row of a top-ops table. ``percent_of_step`` is self time over the summed step time.

    Memory, as torch's ``key_averages()`` names it: ``bytes`` is gross, what the group's ops allocated themselves;
    ``self_net_bytes`` is torch's "Self CPU Mem" (allocated minus freed by the ops themselves) and
    ``total_net_bytes`` its "CPU Mem" (the same including the ops nested in them; by module, the module's ops).
    Both are None when the trace records no frees (flowscope's own captures count output bytes only)."""

    key: str
    calls: int
    self_us: float
    total_us: float
    mean_us: float
    percent_of_step: float
    bytes: int
    flops: float  # NaN when no op of the group has a known FLOP count
    cuda_us: float = 0.0  # summed GPU time of the group's kernels (0 without device time)
    cuda_calls: int = 0  # kernel events of the group
    self_net_bytes: int | None = None
    total_net_bytes: int | None = None

    @property
    def cuda_mean_us(self) -> float:
        return self.cuda_us / self.cuda_calls if self.cuda_calls else 0.0


def step_time_us(columns: TraceColumns) -> float:
    """Summed duration of the step spans; the extent of the ops when the trace has no steps."""
    steps = columns.spans.of(fmt.CAT_STEP)
    if len(steps):
        return float(columns.spans.dur_us[steps].sum())
    ops = columns.ops
    return float((ops.ts_us + ops.dur_us).max() - ops.ts_us.min()) if len(ops) else 0.0


def op_stats(columns: TraceColumns, group_by: str = "op", sort_by: str = "self_us",
             kernels: bool = False) -> list[OpStat]:
    """Host ops (or device kernels) grouped by ``op`` name, innermost ``module``, or op name + input ``shape``.

    For ``module``, calls and total time come from the module spans when the trace has them (inclusive time of
    the module's calls); self time is always the summed self time of the ops attributed to the group."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, got {group_by!r}")
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by must be one of {SORT_KEYS}, got {sort_by!r}")
    ops = columns.ops
    if group_by == "op":
        all_codes, labels = ops.name, ops.names
    elif group_by == "module":
        all_codes, labels = ops.module, ops.modules
    else:
        pair = ops.name.astype(np.int64) * len(ops.shape_strings) + ops.shapes
        unique, all_codes = np.unique(pair, return_inverse=True)
        labels = tuple(f"{ops.names[p // len(ops.shape_strings)]} [{ops.shape_strings[p % len(ops.shape_strings)]}]"
                       for p in unique.tolist())
    size = len(labels)
    device_rows = np.flatnonzero(ops.category == 1)
    # the GPU columns: kernels carry their op's name, module and shapes, so they fall in the op's group
    cuda_us = np.bincount(all_codes[device_rows], ops.dur_us[device_rows], minlength=size)
    cuda_calls = np.bincount(all_codes[device_rows], minlength=size)
    rows = device_rows if kernels else np.flatnonzero(ops.category == 0)
    codes = all_codes[rows]
    calls = np.bincount(codes, minlength=size)
    self_us = np.bincount(codes, ops.self_us[rows], minlength=size)
    total_us = np.bincount(codes, ops.dur_us[rows], minlength=size)
    nbytes = np.bincount(codes, ops.bytes[rows].astype(np.float64), minlength=size)
    flops_known = np.bincount(codes, ~np.isnan(ops.flops[rows]), minlength=size)
    flops = np.where(flops_known > 0, np.bincount(codes, np.nan_to_num(ops.flops[rows]), minlength=size), np.nan)
    self_net = total_net = None
    if ops.total_net_bytes is not None:
        self_net = np.bincount(codes, (ops.bytes[rows] - ops.freed_bytes[rows]).astype(np.float64), minlength=size)
        # by module a group's total is its ops' own bytes (an op nested in another may belong to another module)
        total_net = self_net if group_by == "module" else \
            np.bincount(codes, ops.total_net_bytes[rows].astype(np.float64), minlength=size)
    if group_by == "module":
        calls, total_us = _module_spans(columns, labels, calls, total_us, self_us)
    denominator = step_time_us(columns)
    stats = [OpStat(labels[i], int(calls[i]), float(self_us[i]), float(total_us[i]),
                    float(total_us[i] / calls[i]) if calls[i] else 0.0,
                    float(self_us[i] / denominator * 100.0) if denominator > 0 else 0.0, int(nbytes[i]),
                    float(flops[i]), float(cuda_us[i]), int(cuda_calls[i]),
                    None if self_net is None else int(self_net[i]), None if total_net is None else int(total_net[i]))
             for i in range(size) if calls[i] or self_us[i]]
    return sorted(stats, key=lambda s: (-_sort_value(s, sort_by), s.key))


def _module_spans(columns: TraceColumns, labels: tuple[str, ...], calls: np.ndarray, total_us: np.ndarray,
                  self_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    spans = columns.spans
    modules = spans.of(fmt.CAT_MODULE)
    if not len(modules):
        return calls, total_us
    position = {label: i for i, label in enumerate(labels)}
    span_calls, span_us = np.zeros_like(calls), np.zeros_like(total_us)
    for index in modules.tolist():
        i = position.get(spans.name[index])
        if i is not None:
            span_calls[i] += 1
            span_us[i] += spans.dur_us[index]
    # a group without a span (torch: the ops outside every module) keeps its ops' calls; its total is their self
    # time (their durations would count an op nested in another of the group twice)
    has_span = span_calls > 0
    return np.where(has_span, span_calls, calls), np.where(has_span, span_us, self_us)


def _sort_value(stat: OpStat, key: str) -> float:
    value = getattr(stat, key)
    return -np.inf if value is None or value != value else float(value)  # NaN FLOPs, unknown memory sort last


def format_table(stats: list[OpStat], group_by: str = "op", row_limit: int = 20) -> str:
    """A fixed-width text table, like ``torch.profiler``'s ``key_averages().table()``; with device time, the CUDA
    columns (summed and mean GPU time of the group's kernels) follow the CPU ones."""
    cuda = any(stat.cuda_calls for stat in stats)
    header = (f"{group_by:<40} {'calls':>7} {'self ms':>10} {'total ms':>10} {'mean us':>10} {'% step':>7} "
              + (f"{'CUDA ms':>10} {'CUDA us':>10} " if cuda else "") + f"{'bytes':>12} {'GFLOP':>9}")
    lines = [header, "-" * len(header)]
    for stat in stats[:row_limit] if row_limit > 0 else stats:
        gflop = "" if stat.flops != stat.flops else f"{stat.flops / 1e9:9.3f}"
        device = f"{stat.cuda_us / 1e3:>10.3f} {stat.cuda_mean_us:>10.2f} " if cuda else ""
        lines.append(f"{stat.key[:40]:<40} {stat.calls:>7} {stat.self_us / 1e3:>10.3f} {stat.total_us / 1e3:>10.3f} "
                     f"{stat.mean_us:>10.2f} {stat.percent_of_step:>7.2f} {device}{stat.bytes:>12} {gflop:>9}")
    return "\n".join(lines)
