"""An engine-hooks observer that keeps the op (and memory) events it is given, for tests to compare."""
from __future__ import annotations

from engine import hooks


class OpRecorder:
    """Keeps ``op_end`` events in ``ends``; with ``starts`` also ``op_start`` events in ``starts``, with ``memory``
    also alloc/free events in ``memory``. Only the hook methods asked for exist, so the engine sees exactly those
    subscriptions."""

    def __init__(self, starts: bool = True, memory: bool = True) -> None:
        self.starts: list[hooks.OpEvent] = []
        self.ends: list[hooks.OpEvent] = []
        self.memory: list[hooks.MemoryEvent] = []
        self.op_end = self.ends.append
        if starts:
            self.op_start = self.starts.append
        if memory:
            self.alloc = self.free = self.memory.append
