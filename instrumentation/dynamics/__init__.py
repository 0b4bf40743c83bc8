"""Training dynamics: gradient norms, update ratios, activation statistics, non-finite origin, alerts."""
from __future__ import annotations

from instrumentation.dynamics.thresholds import DynamicsThresholds
from instrumentation.dynamics.watcher import Watch

__all__ = ["DynamicsThresholds", "Watch"]
