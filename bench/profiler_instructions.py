"""Profiler cost per step in CPU instructions (valgrind callgrind): deterministic where wall times are not.

Run ``python bench/profiler_instructions.py [--root DIR] [--variants off,oplog,profile]``. Each variant runs the
digits-MLP step of ``bench/profiler_overhead.py`` under ``valgrind --tool=callgrind`` twice (``--short`` and
``--long`` steps after the same warm-up and a ``gc.freeze()``, one BLAS thread, ``PYTHONHASHSEED=0``); the difference of the two
instruction totals divided by the difference of the step counts is the cost of one step, start-up excluded.
Variants: ``off``, ``oplog`` (an ``OpLog`` installed, nothing else), ``profile`` (``instrumentation.profile()``),
``scheduled`` (``profile(schedule=...)`` mid-cycle). ``--root`` runs another checkout's code (e.g. a copy of the tree before a change) with this driver.
"""
from __future__ import annotations

import gc
import os
import sys

import callgrind

VARIANTS = ("off", "oplog", "profile", "scheduled")


def inner(variant: str, steps: int, warmup: int) -> None:
    """Runs inside valgrind: warm up, then ``steps`` steps of ``variant``."""
    sys.path.insert(0, os.getcwd())
    import engine
    from engine import hooks, nn
    from engine.nn import functional as F

    engine.manual_seed(0)
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = engine.tensor(x[:32]), engine.tensor(y[:32])

    def step() -> None:
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()

    context = None
    if variant == "oplog":
        hooks.add_recorder(engine.op_log.OpLog())
    elif variant in ("profile", "scheduled"):
        import instrumentation
        # scheduled: mid-cycle of a schedule (the profiler follows step_end; the cycle ends after the run)
        plan = instrumentation.schedule(wait=0, warmup=0, active=10**9) if variant == "scheduled" else None
        context = instrumentation.profile(schedule=plan)
        context.__enter__()
    elif variant != "off":
        raise SystemExit(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    for _ in range(warmup):
        step()
    # NOTE: what is alive after the warm-up (modules, the model) moves out of the collector's generations: a full
    # collection in one run and not the other would otherwise add millions of instructions that are not step work
    gc.collect()
    gc.freeze()
    for _ in range(steps):
        step()
    # NOTE: the profile is left open: its exit (trace export) is not per-step work; os._exit skips interpreter teardown
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(callgrind.main(__file__, __doc__, VARIANTS, inner, warmup=30))
