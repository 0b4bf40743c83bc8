"""``python -m instrumentation.demo``: a family of small runs on the bundled digits, one per thing the board explains
(a healthy baseline, an exploding learning rate, dead ReLUs, a NaN, an input-bound pipeline, a leak, an OOM,
hyperparameters with text and images), each written with the real engine and instrumentation."""
from __future__ import annotations

from instrumentation.demo.cli import main
from instrumentation.demo.runs import RUNS, DemoRun

__all__ = ["RUNS", "DemoRun", "main"]
