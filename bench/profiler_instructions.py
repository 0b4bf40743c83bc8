"""Profiler cost per step and per op in CPU instructions (valgrind callgrind): deterministic where wall times are not.

Run ``python bench/profiler_instructions.py [--root DIR] [--variants off,noop,oplog,profile,export]
[--rows digits,64x32]``.
Each variant runs an MLP step of ``bench/mlp_rows.py`` under ``valgrind --tool=callgrind`` twice (``--short`` and
``--long`` steps after the same warm-up and a ``gc.freeze()``, one BLAS thread, ``PYTHONHASHSEED=0``); the difference
of the two instruction totals divided by the difference of the step counts is the cost of one step, start-up
excluded. Variants:

- ``off``: no recorder; ``noop``: a recorder whose ``op`` does nothing (the cost of the engine's observed path alone:
  the floor any op recorder pays); ``oplog``: an ``engine.op_log.OpLog`` installed, nothing else;
- ``profile``: ``instrumentation.profile()``; ``scheduled``: ``profile(schedule=...)`` mid-cycle;
- ``export``: ``profile(logdir)`` left at the end of the run, so the trace export (build, gzip write, columns
  sidecar) is in the count, amortised over the steps (its fixed part cancels in the difference).

Rows: ``digits`` (the one-hidden-layer MLP earlier figures used) or ``WIDTHxBATCH`` (``mlp_rows``). The per-op
column divides the difference to ``off`` by the ops the step runs (forward and backward, counted by a recorder
outside valgrind). ``--root`` runs another checkout's code (e.g. a copy of the tree before a change) with this driver.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile

import callgrind
import mlp_rows

VARIANTS = ("off", "noop", "oplog", "profile", "scheduled", "export")


class _NoOpRecorder:
    """An op recorder that does nothing: what remains is the engine's observed path."""

    def op(self, name: str, module: str, inputs: object, outputs: object, output_bytes: int, start_ns: int) -> None:
        pass


def inner(variant: str, row_text: str, steps: int, warmup: int) -> None:
    """Runs inside valgrind: warm up, then ``steps`` steps of ``variant`` on ``row``."""
    sys.path.insert(0, os.getcwd())
    import engine
    from engine import hooks

    step = mlp_rows.engine_step(mlp_rows.parse_row(row_text))
    context = None
    if variant == "noop":
        hooks.add_recorder(_NoOpRecorder())
    elif variant == "oplog":
        hooks.add_recorder(engine.op_log.OpLog())
    elif variant in ("profile", "scheduled", "export"):
        import instrumentation
        # scheduled: mid-cycle of a schedule (the profiler follows step_end; the cycle ends after the run)
        plan = instrumentation.schedule(wait=0, warmup=0, active=10**9) if variant == "scheduled" else None
        logdir = tempfile.mkdtemp(prefix="flowscope-bench-") if variant == "export" else None
        context = instrumentation.profile(logdir, schedule=plan)
        context.__enter__()
    elif variant != "off":
        raise SystemExit(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    for _ in range(warmup):
        step()
    if variant == "export":  # the warm-up's records are not this run's steps: only the counted steps are exported
        context._recorder.clear()
    # NOTE: what is alive after the warm-up (modules, the model) moves out of the collector's generations: a full
    # collection in one run and not the other would otherwise add millions of instructions that are not step work
    gc.collect()
    gc.freeze()
    for _ in range(steps):
        step()
    if variant == "export":
        context.__exit__(None, None, None)
    # NOTE: other profiles are left open: their exit is not per-step work; os._exit skips interpreter teardown
    sys.stdout.flush()
    os._exit(0)


def ops_per_step(row_text: str) -> float:
    """Forward and backward ops of one step of ``row`` (counted by a recorder, outside valgrind)."""
    from engine import hooks

    class Counter:
        calls = 0

        def op(self, *args: object) -> None:
            self.calls += 1

    step = mlp_rows.engine_step(mlp_rows.parse_row(row_text))
    counter = hooks.add_recorder(Counter())
    try:
        for _ in range(3):
            step()
    finally:
        hooks.remove_recorder(counter)
    return counter.calls / 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--variants", default="off,oplog,profile,scheduled")
    parser.add_argument("--rows", default="digits", help="digits and/or WIDTHxBATCH, comma-separated")
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=110)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner, args.row, args.steps, args.warmup)
        return 0
    sys.path.insert(0, args.root)
    print(f"# instructions per MLP step (callgrind; {args.root}; steps {args.long} - {args.short})")
    print(f"{'row':<8} {'variant':<10} {'instr/step':>12} {'vs off':>11} {'ratio':>7} {'ops/step':>9} "
          f"{'vs off/op':>10}")
    for row in args.rows.split(","):
        ops = ops_per_step(row)
        base = None
        for variant in args.variants.split(","):
            def count(steps: int) -> int:
                arguments = ["--inner", variant, "--row", row, "--steps", str(steps), "--warmup", str(args.warmup)]
                return callgrind.instructions(__file__, arguments, f"{variant} {row}", cwd=args.root)
            step = callgrind.per_step(count, args.short, args.long)
            base = step if base is None else base
            print(f"{row:<8} {variant:<10} {step:>12,.0f} {step - base:>+11,.0f} {step / base:>7.3f} {ops:>9.0f} "
                  f"{(step - base) / ops:>+10,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
