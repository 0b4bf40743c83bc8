"""Memory tracking: the allocator timeline, snapshots, OOM capture and leak detection (``MemoryTracker``)."""
from __future__ import annotations

from instrumentation.memory.leak import LeakGroup, LeakSettings
from instrumentation.memory.tracker import MemoryBreakdown, MemoryTracker

__all__ = ["LeakGroup", "LeakSettings", "MemoryBreakdown", "MemoryTracker"]
