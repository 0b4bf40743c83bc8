"""A profile capture's op records joined to a graph's nodes (time and memory per node), and eager vs traced.

A record carrying a node id (`graph_file.ARG_NODE`, written on replay) joins that node. Other records (an eager
run) join by op name and module path: within a step, the k-th record of (op, module) is the k-th node of that
(op, module) in the graph's execution order.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from board.data.graph import KIND_OP, GraphView
from board.data.profile_captures import Capture, find_captures
from instrumentation.format import graph_file
from instrumentation.format import trace as fmt

CACHED_RECORDS = 8
PICK_FROM = 6  # the newest captures looked at when picking one
_TORCH_OP_CATS = ("cpu_op", "operator")


@dataclass(frozen=True, slots=True)
class OpRecord:
    name: str
    module: str
    node: str  # "" when the record carries no node id (eager)
    step: int
    ts_us: float
    dur_us: float
    bytes: int


@dataclass(frozen=True)
class CaptureRecords:
    records: tuple[OpRecord, ...]
    steps: int  # distinct steps the records fall in (at least 1 when there are records)

    @property
    def traced(self) -> bool:
        """Replayed from a traced graph: the records carry node ids."""
        return any(record.node for record in self.records)


@dataclass(frozen=True, slots=True)
class NodeCost:
    time_ms: float  # per step
    bytes: float  # allocated per step
    calls: float  # per step


@dataclass(frozen=True)
class GraphCosts:
    per_node: dict[str, NodeCost]
    joined_by: str  # "node id" or "op name and module"
    matched_records: int
    unmatched_records: int
    steps: int


def records_from_trace(trace: dict[str, Any]) -> CaptureRecords:
    """The host op records of a loaded Chrome trace (flowscope's or torch.profiler's)."""
    records = []
    for event in trace.get("traceEvents") or ():
        if type(event) is not dict or event.get("ph") != "X" or event.get("cat") not in (fmt.CAT_OP, *_TORCH_OP_CATS):
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        step, nbytes = args.get(fmt.ARG_STEP, -1), args.get(fmt.ARG_BYTES, 0)
        try:
            records.append(OpRecord(str(event.get("name", "")), str(args.get(fmt.ARG_MODULE) or ""),
                                    str(args.get(graph_file.ARG_NODE) or ""), int(step) if type(step) is int else -1,
                                    float(event.get("ts", 0.0)), max(0.0, float(event.get("dur", 0.0))),
                                    int(nbytes) if type(nbytes) is int and nbytes > 0 else 0))
        except (TypeError, ValueError):
            continue  # a record with a non-numeric time: skipped, like the profile page's columns do
    records.sort(key=lambda record: (record.step, record.ts_us))
    steps = len({record.step for record in records}) if records else 0
    return CaptureRecords(tuple(records), max(steps, 1) if records else 0)


class RecordCache:
    """The last few captures' records, keyed by path, size and mtime."""

    def __init__(self, size: int = CACHED_RECORDS) -> None:
        self.size = size
        self._entries: OrderedDict[tuple, CaptureRecords] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, capture: Capture) -> CaptureRecords:
        """OSError/ValueError when the trace cannot be read."""
        key = (str(capture.path), capture.size_bytes, capture.mtime)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        records = records_from_trace(fmt.read_trace(capture.path, capture.root))
        with self._lock:
            self._entries[key] = records
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return records


def join_costs(view: GraphView, captured: CaptureRecords) -> GraphCosts:
    """Time, bytes and calls per step of each op node of `view`."""
    ops = [node for node in view.nodes if node.kind == KIND_OP]
    totals = {node.id: [0.0, 0, 0] for node in ops}
    matched = unmatched = 0
    by_id = captured.traced
    if by_id:
        for record in captured.records:
            total = totals.get(record.node)
            if total is None:
                unmatched += 1
                continue
            total[0] += record.dur_us
            total[1] += record.bytes
            total[2] += 1
            matched += 1
    else:
        slots: dict[tuple[str, str], list[str]] = {}
        for node in ops:
            slots.setdefault((node.record_name, node.module), []).append(node.id)
        seen: dict[tuple[str, str], int] = {}
        step = None
        for record in captured.records:
            if record.step != step:
                step, seen = record.step, {}
            key = (record.name, record.module)
            ids = slots.get(key)
            occurrence = seen.get(key, 0)
            seen[key] = occurrence + 1
            if ids is None or occurrence >= len(ids):
                unmatched += 1
                continue
            total = totals[ids[occurrence]]
            total[0] += record.dur_us
            total[1] += record.bytes
            total[2] += 1
            matched += 1
    steps = max(captured.steps, 1)
    per_node = {node_id: NodeCost(time_us / 1e3 / steps, nbytes / steps, calls / steps)
                for node_id, (time_us, nbytes, calls) in totals.items() if calls}
    return GraphCosts(per_node, "node id" if by_id else "op name and module", matched, unmatched, captured.steps)


# ---- eager vs traced --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ComparisonRow:
    key: str  # an op name or a module path ("(model)" for ops outside every module)
    eager_ms: float  # per step
    traced_ms: float
    eager_bytes: float  # allocated per step
    traced_bytes: float

    @property
    def time_ratio(self) -> float | None:
        return self.traced_ms / self.eager_ms if self.eager_ms > 0 else None


def _per_key(captured: CaptureRecords, by: str) -> dict[str, tuple[float, float]]:
    sums: dict[str, list[float]] = {}
    for record in captured.records:
        key = record.name if by == "op" else (record.module or "(model)")
        total = sums.setdefault(key, [0.0, 0.0])
        total[0] += record.dur_us
        total[1] += record.bytes
    steps = max(captured.steps, 1)
    return {key: (time_us / 1e3 / steps, nbytes / steps) for key, (time_us, nbytes) in sums.items()}


def compare(eager: CaptureRecords, traced: CaptureRecords, by: str = "op") -> list[ComparisonRow]:
    """Per op name (`by="op"`) or module (`by="module"`): time and allocated bytes per step in each capture, the
    biggest eager time first (ops only one side has, e.g. fused ops, are listed with 0 on the other side)."""
    if by not in ("op", "module"):
        raise ValueError(f"compare by 'op' or 'module', not {by!r}")
    left, right = _per_key(eager, by), _per_key(traced, by)
    rows = [ComparisonRow(key, *left.get(key, (0.0, 0.0))[:1], *right.get(key, (0.0, 0.0))[:1],
                          left.get(key, (0.0, 0.0))[1], right.get(key, (0.0, 0.0))[1])
            for key in dict.fromkeys([*left, *right])]
    return sorted(rows, key=lambda row: (-max(row.eager_ms, row.traced_ms), row.key))



# ---- which captures ---------------------------------------------------------------------------------------------
def run_captures(logdir: Path, run: str | None) -> dict[str, Capture]:
    """The profile captures of one run by key, newest first."""
    return {key: capture for key, capture in find_captures(logdir).items() if capture.run == run}


def pick_capture(captures: dict[str, Capture], cache: RecordCache, traced: bool, strict: bool = False
                 ) -> Capture | None:
    """The newest capture that is traced (replayed from a graph) or eager as asked; with `strict` False, else the
    newest readable one. Unreadable captures are passed over."""
    readable = []
    for capture in list(captures.values())[:PICK_FROM]:
        try:
            records = cache.load(capture)
        except (OSError, ValueError):
            continue
        if records.traced == traced:
            return capture
        readable.append(capture)
    return None if strict or not readable else readable[0]
