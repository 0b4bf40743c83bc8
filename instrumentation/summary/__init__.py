"""SummaryWriter: asynchronous, crash-safe TensorBoard event files (builders -> framing -> async file writer)."""
from __future__ import annotations

from instrumentation.summary.writer import SummaryWriter

__all__ = ["SummaryWriter"]
