"""Profiler cost per step in CPU instructions (valgrind callgrind): deterministic where wall times are not.

Run ``python bench/profiler_instructions.py [--root DIR] [--variants off,oplog,profile]``. Each variant runs the
digits-MLP step of ``bench/profiler_overhead.py`` under ``valgrind --tool=callgrind`` twice (``--short`` and
``--long`` steps after the same warm-up and a ``gc.freeze()``, one BLAS thread, ``PYTHONHASHSEED=0``); the difference of the two
instruction totals divided by the difference of the step counts is the cost of one step, start-up excluded.
Variants: ``off``, ``oplog`` (an ``OpLog`` installed, nothing else), ``profile`` (``instrumentation.profile()``),
``scheduled`` (``profile(schedule=...)`` mid-cycle). ``--root`` runs another checkout's code (e.g. a copy of the tree before a change) with this driver.
"""
from __future__ import annotations

import argparse
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


def instructions(root: str, variant: str, steps: int, warmup: int) -> int:
    arguments = ["--inner", variant, "--steps", str(steps), "--warmup", str(warmup)]
    return callgrind.instructions(__file__, arguments, repr(variant), cwd=root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=110)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner, args.steps, args.warmup)
        return 0
    print(f"# instructions per digits-MLP step (callgrind; {args.root}; steps {args.long} - {args.short})")
    print(f"{'variant':<10} {'instr/step':>12} {'vs off':>10} {'ratio':>7}")
    base = None
    for variant in args.variants.split(","):
        per_step = callgrind.per_step(lambda steps: instructions(args.root, variant, steps, args.warmup),
                                      args.short, args.long)
        base = per_step if base is None else base
        print(f"{variant:<10} {per_step:>12,.0f} {per_step - base:>+10,.0f} {per_step / base:>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
