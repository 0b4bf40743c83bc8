"""Runs written by the real memory tracker for the Memory page's one-truth tests: a thinned run whose highest peak is an
evaluation after training, an OOM under a limit, a leak; each function returns what the tests check against."""
from __future__ import annotations

import gc
from pathlib import Path

import numpy as np

import memory_runs  # noqa: F401 - puts the tracker's training loops on sys.path
import engine
from engine import hooks, memory
from instrumentation import MemoryTracker, SummaryWriter
from training_loops import train

EVALUATION_BYTES = 2**20  # held by the evaluation after training, on top of what training left live
EVERY = 4
OOM_LIMIT_BYTES = 40_000


def write_evaluated_run(run_dir: Path, steps: int = 22) -> dict[str, int]:
    """`steps` training steps logged one in EVERY, then an evaluation (no_grad) holding EVALUATION_BYTES; returns the
    step in progress at closing and the bytes allocated just before the evaluation."""
    gc.collect()
    hooks.reset_step(0)
    with SummaryWriter(run_dir) as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=None, host_rss=False, every=EVERY)
        train(steps, "")
        before = memory.allocated_bytes("cpu")
        with engine.no_grad():
            held = engine.tensor(np.zeros(EVALUATION_BYTES // 4, np.float32))
            del held
        tracker.close()
    hooks.reset_step(0)
    return {"closing_step": steps, "before": before}


def write_oom_run(run_dir: Path) -> None:
    """Training under OOM_LIMIT_BYTES until the engine refuses an allocation (every step logged)."""
    gc.collect()
    hooks.reset_step(0)
    with SummaryWriter(run_dir) as writer:
        tracker = MemoryTracker(writer, every=1)
        memory.set_limit(OOM_LIMIT_BYTES)
        try:
            train(60, "")
        except engine.OutOfMemoryError:
            pass
        finally:
            memory.set_limit(None)
            tracker.close()
    hooks.reset_step(0)


def write_leak_run(run_dir: Path, steps: int = 120) -> None:
    """A hook keeps every fc1 output; the scalars are logged one step in 5 (the leak test still sees every step)."""
    gc.collect()
    hooks.reset_step(0)
    with SummaryWriter(run_dir) as writer:
        tracker = MemoryTracker(writer, stacks=False, every=5)
        train(steps, "hook")
        tracker.close()
    hooks.reset_step(0)
