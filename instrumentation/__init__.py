"""Everything that observes training and writes files; `SummaryWriter` is loaded on first use."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from instrumentation.summary import SummaryWriter
    from instrumentation.monitor import DynamicsThresholds, watch
    from instrumentation.memory import MemoryTracker
    from instrumentation.system import SystemSampler
    from instrumentation.profiler import OnDemandCapture, profile, schedule, span
    from instrumentation.distributed import RankMonitor, rank_logdir

__all__ = ["DynamicsThresholds", "MemoryTracker", "OnDemandCapture", "RankMonitor", "SummaryWriter", "SystemSampler",
           "profile", "rank_logdir", "schedule", "span", "watch"]


def __getattr__(name: str) -> Any:
    # NOTE: lazy, so that `import instrumentation.format` (all the board needs) never loads the writer.
    if name == "SummaryWriter":
        from instrumentation.summary import SummaryWriter

        return SummaryWriter
    if name in ("watch", "DynamicsThresholds"):
        from instrumentation import monitor

        return getattr(monitor, name)
    if name in ("RankMonitor", "rank_logdir"):
        from instrumentation import distributed

        return getattr(distributed, name)
    if name == "MemoryTracker":
        from instrumentation.memory import MemoryTracker

        return MemoryTracker
    if name == "SystemSampler":
        from instrumentation.system import SystemSampler

        return SystemSampler
    if name in ("profile", "schedule", "span", "OnDemandCapture"):
        # NOTE: from the defining modules: `instrumentation.profiler.profile` etc. are also submodule names.
        import importlib

        module = {"profile": "profile", "schedule": "schedule", "span": "spans", "OnDemandCapture": "ondemand"}[name]
        return getattr(importlib.import_module(f"instrumentation.profiler.{module}"), name)
    raise AttributeError(f"module 'instrumentation' has no attribute {name!r}")
