"""The profiler: per-op timings from the engine's hooks, Chrome traces per capture, on-demand capture."""
from __future__ import annotations

from instrumentation.profiler.aggregate import KeyAverages
from instrumentation.profiler.input_bound import INPUT_BOUND_SHARE, InputBoundDetector
from instrumentation.profiler.ondemand import OnDemandCapture
from instrumentation.profiler.profile import profile
from instrumentation.profiler.schedule import ProfilerAction, Schedule, schedule
from instrumentation.profiler.spans import span

__all__ = ["INPUT_BOUND_SHARE", "InputBoundDetector", "KeyAverages", "OnDemandCapture", "ProfilerAction", "Schedule",
           "profile", "schedule", "span"]
