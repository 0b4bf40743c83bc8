"""The communication side of a capture: collectives on their own lane, waits for gradient buckets on the training
thread's, and the rank the trace belongs to."""
from __future__ import annotations

import os
from typing import Any, Callable

from instrumentation.distributed.context import initialized
from instrumentation.format import trace as fmt


def comm_events(comm: list[tuple], comm_waits: list[tuple], us: Callable[[int], float], pid: int) -> list[dict]:
    """Chrome trace events for ``comm`` — ``(name, bucket, nbytes, start_ns, end_ns, step)`` per collective: ``X``
    events of category ``comm`` on the ``communication`` lane — and ``comm_waits`` — ``(step, start_ns, end_ns,
    nbytes, buckets)``: ``comm_wait`` spans on the training thread's lane."""
    events: list[dict[str, Any]] = []
    if comm:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": fmt.TID_COMM,
                       "args": {"name": fmt.COMM_LANE_NAME}})
    for name, bucket, nbytes, start_ns, end_ns, step in comm:
        events.append({"ph": "X", "cat": fmt.CAT_COMM, "name": name, "ts": us(start_ns),
                       "dur": (end_ns - start_ns) / 1000.0, "pid": pid, "tid": fmt.TID_COMM,
                       "args": {fmt.ARG_STEP: step, fmt.ARG_BYTES: nbytes, fmt.ARG_BUCKET: bucket}})
    for step, start_ns, end_ns, nbytes, buckets in comm_waits:
        events.append({"ph": "X", "cat": fmt.CAT_COMM_WAIT, "name": fmt.CAT_COMM_WAIT, "ts": us(start_ns),
                       "dur": (end_ns - start_ns) / 1000.0, "pid": pid, "tid": fmt.TID_HOST,
                       "args": {fmt.ARG_STEP: step, fmt.ARG_BYTES: nbytes, fmt.ARG_BUCKETS: buckets}})
    return events


def trace_rank() -> int:
    """``engine.distributed.rank()`` when initialised, else the ``RANK`` environment variable (0 if unset or not a
    number: a launcher's variable is a hint, not an input to fail on)."""
    module = initialized()
    if module is not None:
        return int(module.rank())
    try:
        return int(os.environ.get("RANK", 0))
    except ValueError:
        return 0
