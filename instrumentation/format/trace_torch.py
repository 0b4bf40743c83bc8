"""What torch.profiler records beyond op spans: autograd links (phase), ``[memory]`` events and device kernels."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_EMPTY: dict[str, Any] = {}
# args and names torch.profiler writes
FWD_THREAD_ID = "Fwd thread id"  # set (> 0) on the ops the autograd engine runs for a backward node
SEQUENCE_NUMBER = "Sequence number"  # links a backward node to the forward op that recorded it
AUTOGRAD_PREFIX = "autograd::engine::evaluate_function"
FLOW_FWDBWD = "fwdbwd"  # flow events: "s" at the forward op, "f" at its backward node (same id)
FLOW_KERNEL = "ac2g"  # flow events from a host launch ("s") to the device kernel ("f")
MEMORY_EVENT = "[memory]"  # instant event per allocation (Bytes > 0) or free (Bytes < 0)
MEMORY_BYTES, MEMORY_TOTAL = "Bytes", "Total Allocated"
MEMORY_DEVICE_TYPE, MEMORY_DEVICE_ID = "Device Type", "Device Id"
CORRELATION = "correlation"  # args of a kernel and of the runtime call that launched it
MODULE_PREFIX = "nn.Module: "  # python_function events (with_stack=True) of each Module.__call__: "nn.Module: Linear_0"
PYTHON_CAT = "python_function"


@dataclass(frozen=True)
class MemoryEvents:
    """torch's ``[memory]`` events in time order: who (tid) allocated (+) or freed (-) how many bytes, and the
    allocated total of all devices after each."""

    ts_us: np.ndarray
    tid: np.ndarray
    bytes: np.ndarray
    total_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.ts_us)


def memory_events(events: list[Any], thread_id) -> MemoryEvents:
    """The ``[memory]`` instant events of a trace (``thread_id`` maps an event's tid as the op columns do)."""
    found = [e for e in events if type(e) is dict and e.get("ph") == "i" and e.get("name") == MEMORY_EVENT]
    found.sort(key=lambda e: e.get("ts", 0.0))
    totals: dict[tuple, int] = {}
    total = np.zeros(len(found), dtype=np.int64)
    for i, event in enumerate(found):  # each device's total is its own: the curve is their sum
        args = event.get("args") or _EMPTY
        totals[(args.get(MEMORY_DEVICE_TYPE), args.get(MEMORY_DEVICE_ID))] = int(args.get(MEMORY_TOTAL) or 0)
        total[i] = sum(totals.values())
    return MemoryEvents(np.array([float(e.get("ts", 0.0)) for e in found], dtype=np.float64),
                        np.array([thread_id(e) for e in found], dtype=np.int64),
                        np.array([int((e.get("args") or _EMPTY).get(MEMORY_BYTES) or 0) for e in found],
                                 dtype=np.int64),
                        total)


def module_paths(names: list[str], ts: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> list[str]:
    """Each ``nn.Module:`` event's path: the instance names of the module events holding it on its thread, outermost
    first, and its own, joined by "." (``Sequential_0.Conv2d_0``)."""
    parent = parents(ts, dur, tid)
    own = [name[len(MODULE_PREFIX):] if name.startswith(MODULE_PREFIX) else name for name in names]
    paths = list(own)
    for i in np.lexsort((-dur, ts, tid)).tolist():  # holders before the modules they hold
        if parent[i] >= 0:
            paths[i] = f"{paths[parent[i]]}.{own[i]}"
    return paths


def parents(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Each op's innermost enclosing op on its thread (torch nests ops), or -1."""
    parent = np.full(len(ts), -1, dtype=np.int64)
    ends = ts + dur
    stack: list[int] = []
    for i in np.lexsort((-dur, ts, tid)).tolist():  # an op before the ops it holds
        while stack and (tid[stack[-1]] != tid[i] or ts[i] >= ends[stack[-1]]):
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


def owners(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, at_ts: np.ndarray, at_tid: np.ndarray) -> np.ndarray:
    """For each point (``at_ts`` on thread ``at_tid``), the innermost op of that thread whose [ts, ts + dur] holds
    it, or -1."""
    n = len(ts)
    owner = np.full(len(at_ts), -1, dtype=np.int64)
    if not n or not len(at_ts):
        return owner
    all_tid, all_ts = np.concatenate([tid, at_tid]), np.concatenate([ts, at_ts])
    is_point = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(len(at_ts), dtype=np.int8)])
    longest_first = np.concatenate([-dur, np.zeros(len(at_ts))])
    ends = ts + dur
    stack: list[int] = []
    for k in np.lexsort((longest_first, is_point, all_ts, all_tid)).tolist():  # an op opens before a point at its start
        k_tid, k_ts = all_tid[k], all_ts[k]
        if k < n:
            while stack and (tid[stack[-1]] != k_tid or k_ts >= ends[stack[-1]]):
                stack.pop()
            stack.append(k)
            continue
        while stack and (tid[stack[-1]] != k_tid or k_ts > ends[stack[-1]]):
            stack.pop()
        owner[k - n] = stack[-1] if stack else -1
    return owner


def flow_targets(events: list[Any], category: str, thread_id) -> set[tuple[int, float]]:
    """(tid, ts) of the ends ("f") of flows of ``category``: the slices they bind to start there."""
    return {(thread_id(e), float(e.get("ts", 0.0))) for e in events
            if type(e) is dict and e.get("ph") == "f" and e.get("cat") == category}


def backward_ops(names: tuple[str, ...], codes: np.ndarray, args: list[dict], ts: np.ndarray, dur: np.ndarray,
                 tid: np.ndarray, flow_ends: set[tuple[int, float]]) -> np.ndarray:
    """Which ops ran for backward: autograd's nodes, known by the forward thread torch records on them, the
    ``fwdbwd`` flow that ends at them, or their name (older traces); and every op nested inside one of those on
    its thread (the matmuls of ``AddmmBackward0``, the work on the autograd thread)."""
    named = np.array(["Backward" in n or n.startswith(AUTOGRAD_PREFIX) for n in names], dtype=bool)
    root = named[codes] if len(codes) else np.zeros(0, dtype=bool)
    for i, a in enumerate(args):
        if (a.get(FWD_THREAD_ID) or 0) > 0 or (flow_ends and (int(tid[i]), float(ts[i])) in flow_ends):
            root[i] = True
    if not root.any():
        return root
    parent = parents(ts, dur, tid)
    backward = root.copy()
    for i in np.lexsort((-dur, ts, tid)).tolist():  # parents before children
        if parent[i] >= 0 and backward[parent[i]]:
            backward[i] = True
    return backward


def op_memory(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, memory: MemoryEvents) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each op allocated and freed itself (events inside it and not inside an op nested in it), as torch's
    "Self CPU Mem"/"Self CUDA Mem" count them; events outside every op are not attributed."""
    allocated, freed = np.zeros(len(ts), dtype=np.int64), np.zeros(len(ts), dtype=np.int64)
    owner = owners(ts, dur, tid, memory.ts_us, memory.tid)
    known = owner >= 0
    alloc = known & (memory.bytes > 0)
    free = known & (memory.bytes < 0)
    np.add.at(allocated, owner[alloc], memory.bytes[alloc])
    np.add.at(freed, owner[free], -memory.bytes[free])
    return allocated, freed


def merged_into_parent(codes: np.ndarray, ts: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Each op's parent when torch's key_averages folds it into that parent (the parent has the same name and no
    other child: ``aten::mean`` calling ``aten::mean``), else -1; chains fold into their outermost op."""
    parent = parents(ts, dur, tid)
    children = np.bincount(parent[parent >= 0], minlength=len(ts))
    into = np.full(len(ts), -1, dtype=np.int64)
    for i in np.lexsort((-dur, ts, tid)).tolist():  # holders first: a chain's outer link is resolved before
        p = parent[i]
        if p >= 0 and codes[p] == codes[i] and children[p] == 1:
            into[i] = into[p] if into[p] >= 0 else p
    return into


def inclusive_bytes(self_bytes: np.ndarray, ts: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Each op's own bytes plus those of every op nested in it on its thread (torch's "CPU Mem" from the net "Self
    CPU Mem")."""
    total = self_bytes.astype(np.int64).copy()
    if not len(total):
        return total
    parent = parents(ts, dur, tid)
    for i in np.lexsort((-dur, ts, tid))[::-1].tolist():  # the innermost first: children before their holders
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    return total


RUNTIME_CATS = ("cuda_runtime", "cuda_driver")  # host-side launches: cudaLaunchKernel, cudaMemcpyAsync …


def launches(events: list[Any], thread_id) -> dict[int, tuple[int, float]]:
    """correlation id -> (tid, ts) of the host runtime call that launched a device op."""
    found = {}
    for event in events:
        if type(event) is dict and event.get("ph") == "X" and event.get("cat") in RUNTIME_CATS:
            correlation = (event.get("args") or _EMPTY).get(CORRELATION)
            if correlation is not None:
                found[correlation] = (thread_id(event), float(event.get("ts", 0.0)))
    return found


def kernel_phases(args: list[dict], kernel: np.ndarray, ts: np.ndarray, dur: np.ndarray, tid: np.ndarray,
                  phase: np.ndarray, launched: dict[int, tuple[int, float]]) -> np.ndarray:
    """A device op's phase is the phase of the host op that launched it (the innermost op holding its runtime
    call, matched by ``correlation`` as torch's ``ac2g`` flows draw it); kernels without a known launch keep
    ``phase``."""
    rows = [i for i in np.flatnonzero(kernel).tolist() if (args[i].get(CORRELATION) in launched)]
    if not rows or not launched:
        return phase
    host = np.flatnonzero(~kernel)
    calls = [launched[args[i][CORRELATION]] for i in rows]
    owner = owners(ts[host], dur[host], tid[host], np.array([c[1] for c in calls], dtype=np.float64),
                   np.array([c[0] for c in calls], dtype=np.int64))
    phase = phase.copy()
    for row, launcher in zip(rows, owner.tolist()):
        if launcher >= 0:
            phase[row] = phase[host[launcher]]
    return phase
