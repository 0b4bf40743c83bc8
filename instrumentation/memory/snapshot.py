"""Build a memory snapshot (``instrumentation.format.memory_snapshot``) from the tracker's live blocks and history."""
from __future__ import annotations

import time
from typing import Any, Iterable

from engine import memory
from instrumentation.format.memory_snapshot import (AllocatorState, HistoryEntry, MemoryBlock, MemorySnapshot,
                                                    Requested)
from instrumentation.memory.boundary import stack_of


def allocator_state(device: str, allocated_bytes: int | None = None, peak_bytes: int | None = None) -> AllocatorState:
    """The engine's figures for ``device``. The CPU allocator has no pool, so nothing is reserved beyond what is
    allocated and the whole headroom under the limit is one free block: largest_free_block = limit - allocated
    (None without a limit) and fragmentation 0. A device with a pool (``engine.memory.pool_stats``) reports the pool's
    reserved bytes, largest free chunk and fragmentation (free bytes unusable by the current request size over
    reserved bytes)."""
    stats = memory.stats(device)
    allocated = stats.allocated_bytes if allocated_bytes is None else allocated_bytes
    limit = stats.limit_bytes
    largest_free = None if limit is None else max(0, limit - allocated)
    peak = stats.peak_bytes if peak_bytes is None else max(peak_bytes, allocated)
    pool = memory.pool_stats(device)
    if pool is not None and pool.fragmentation_bytes is not None:  # a device pool: its own free chunks
        return AllocatorState(allocated=allocated, reserved=max(pool.reserved_bytes, allocated), peak=peak,
                              limit=limit, largest_free_block=pool.largest_free_block,
                              fragmentation=pool.fragmentation_bytes / pool.reserved_bytes
                              if pool.reserved_bytes else 0.0)
    return AllocatorState(allocated=allocated, reserved=max(stats.reserved_bytes, allocated), peak=peak,
                          limit=limit, largest_free_block=largest_free, fragmentation=0.0)


def block_records(live: dict[int, memory.Block], device: str, names: dict[int, str] | None = None,
                  stacks: bool = False) -> tuple[MemoryBlock, ...]:
    """The blocks of ``device`` in ``live`` (buffer id → block) as snapshot blocks, largest first, with their stacks
    (``stacks``: as ``boundary.stack_of``). ``names`` maps buffer ids of known parameters/gradients to their owner's
    dotted path, used as the module when the allocation had none."""
    names = names or {}
    records = []
    for buffer_id, b in live.items():
        if b.device != device:
            continue
        module = b.module or names.get(buffer_id, "")
        records.append(MemoryBlock(b.bytes, tuple(b.shape), b.dtype, b.op, module, b.step, stack_of(b, stacks),
                                   b.category))
    records.sort(key=lambda r: -r.bytes)
    return tuple(records)


def history_records(history: Iterable[tuple], origin_ns: int, device: str) -> tuple[HistoryEntry, ...]:
    """History records of ``device`` (the allocator's ``(time_ns, action, bytes, op, step, device)``, see
    ``engine.memory_recording.HistoryRing``), time in seconds since ``origin_ns``."""
    return tuple(HistoryEntry(round((t - origin_ns) / 1e9, 9), action, nbytes, op, step)
                 for t, action, nbytes, op, step, dev in history if dev == device)


def build_snapshot(*, device: str, reason: str, step: int, live: dict[int, memory.Block], history: Iterable[tuple],
                   origin_ns: int, names: dict[int, str] | None = None, requested: Requested | None = None,
                   allocated_bytes: int | None = None, peak_bytes: int | None = None,
                   extra: dict[str, Any] | None = None, phase: str = "", stacks: bool = False) -> MemorySnapshot:
    return MemorySnapshot(device=device, reason=reason, step=step, wall_time=time.time(),
                          allocator=allocator_state(device, allocated_bytes, peak_bytes),
                          blocks=block_records(live, device, names, stacks),
                          history=history_records(history, origin_ns, device), requested=requested,
                          extra=dict(extra or {}), phase=phase)


def parameter_names(model: Any) -> dict[int, str]:
    """Buffer ids (the id of the root array, as the allocator keys them) of ``model``'s parameters and their
    gradients → "<owner module path>" (the parameter's dotted name without its last part)."""
    if model is None:
        return {}
    names: dict[int, str] = {}
    for name, param in model.named_parameters():
        owner = name.rpartition(".")[0] or name
        for array in (param.data, param.grad.data if param.grad is not None else None):
            if array is not None:
                names[id(_root(array))] = owner
    return names


def _root(array: Any) -> Any:
    while getattr(array, "base", None) is not None and hasattr(array.base, "nbytes"):
        array = array.base
    return array
