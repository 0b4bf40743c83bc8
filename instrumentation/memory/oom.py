"""OOM capture: the snapshot and alert written when the engine refuses an allocation (the error still propagates)."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from instrumentation.format import alert_names as names
from instrumentation.format.alerts import Alert
from instrumentation.format.memory_snapshot import MemorySnapshot, Requested
from instrumentation.format.units import format_bytes
from instrumentation.memory.leak import site_of

TOP_SITES = 5


def oom_alert(event: Any, snapshot: MemorySnapshot, capture_id: str | None) -> Alert:
    """The ``oom`` alert: the request, the allocator state and where the memory in use was allocated."""
    where = f"op '{event.op}'" if event.op else "a tensor"
    if event.module:
        where += f" in module '{event.module}'"
    by_site: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for block in snapshot.blocks:
        entry = by_site[(site_of(block.stack, block.op, block.module), block.category)]
        entry[0] += block.bytes
        entry[1] += 1
    top = sorted(by_site.items(), key=lambda item: -item[1][0])[:TOP_SITES]
    allocator = snapshot.allocator
    message = (f"out of memory on {event.device} at step {event.step}: {where} ({event.phase}) requested "
               f"{format_bytes(event.requested_bytes)} with {format_bytes(event.allocated_bytes)} in use "
               + ("and no limit set (the system refused it)" if event.limit_bytes is None else
                  f"and a limit of {format_bytes(event.limit_bytes)}"))
    if top:
        (site, category), (nbytes, _) = top[0]
        message += f"; the most memory in use was allocated at {site} ({category}, {format_bytes(nbytes)})"
    return Alert(kind=names.OOM, severity="error", subject=f"{event.op or 'allocation'}@{event.module or 'top level'}",
                 message=message, step=event.step, evidence={
                     "device": event.device, names.SNAPSHOT: capture_id, "requested_bytes": event.requested_bytes,
                     "allocated_bytes": event.allocated_bytes, "limit_bytes": event.limit_bytes,
                     "largest_free_block": allocator.largest_free_block, "fragmentation": allocator.fragmentation,
                     "op": event.op, "module": event.module, "phase": event.phase, "live_blocks": len(snapshot.blocks),
                     "top_sites": [{"site": site, "category": category, "bytes": nbytes, "blocks": count}
                                   for (site, category), (nbytes, count) in top]})


def requested_of(event: Any) -> Requested:
    return Requested(event.requested_bytes, event.op, event.module)
