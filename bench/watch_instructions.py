"""watch() cost per step in CPU instructions (valgrind callgrind): deterministic where wall times on a shared
machine are not.

Run ``python bench/watch_instructions.py [--models mlp,cnn] [--variants off,defaults,...]``. Each variant runs
``bench/watch_overhead.py``'s step (digits, batch 64, SGD momentum) under ``valgrind --tool=callgrind`` twice
(``--short`` and ``--long`` steps after the same warm-up — past the budget's warm-up and settling — and a
``gc.freeze()``, one BLAS thread, ``PYTHONHASHSEED=0``); the difference of the two instruction totals over the
difference of the step counts is the cost of one step, start-up excluded. All threads count: the writer thread's
encoding of what a variant logs is in its figure. What instructions do not show: cache misses and waits (a sampled
step's cold code costs more time than its instruction count says). The budget's own variants (defaults) pace by
timings that valgrind distorts; ``every=1000`` (the per-step cost) and ``every=1`` (plus one sample per step) give
the parts that do not depend on it: a paced run costs about every=1000 + (every=1 - every=1000) / k.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile

import callgrind

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

VARIANTS = {"off": None, "defaults": {}, "no-memory": {"memory": False}, "every=1": {"every": 1},
            "every=1,no-memory": {"every": 1, "memory": False},
            "every=1000,no-memory": {"every": 1000, "memory": False, "histograms_every": 0},
            "check_numerics": {"check_numerics": True}}


def inner(model_name: str, variant: str, steps: int, warmup: int) -> None:
    """Runs inside valgrind: warm up, then ``steps`` steps of ``variant``."""
    from bench.watch_overhead import BATCH, models, step_function

    import engine
    from instrumentation import SummaryWriter, watch

    model = models()["MLP 64-128-10" if model_name == "mlp" else "CNN"]
    (x, y), _ = engine.datasets.load_digits(seed=0)
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x) - BATCH + 1, BATCH)]
    step, optimizer = step_function(model, batches)
    options = VARIANTS[variant]
    with tempfile.TemporaryDirectory() as logdir:
        writer = SummaryWriter(logdir, flush_secs=3600.0)
        handle = None if options is None else watch(model, writer, optimizer=optimizer, **options)
        for _ in range(warmup):
            step(handle)
        writer.flush()
        gc.collect()
        gc.freeze()
        for _ in range(steps):
            step(handle)
        writer.flush()  # NOTE: the writer thread's work for these steps is counted
        sys.stdout.flush()
        os._exit(0)


def instructions(model: str, variant: str, steps: int, warmup: int) -> int:
    arguments = ["--inner", variant, "--model", model, "--steps", str(steps), "--warmup", str(warmup)]
    return callgrind.instructions(__file__, arguments, f"{model} {variant!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--variants", default=";".join(VARIANTS), help="names from VARIANTS, separated by ;")
    parser.add_argument("--short", type=int, default=20)
    parser.add_argument("--long", type=int, default=420, help="MLP steps; the CNN runs a fifth of the steps")
    parser.add_argument("--warmup", type=int, default=250)
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.model, args.inner, args.steps, args.warmup)
        return 0
    print("# instructions per step under watch() (callgrind, all threads; long - short steps)")
    print(f"{'model':<5} {'variant':<30} {'instr/step':>12} {'ratio':>7}")
    for model in args.models.split(","):
        scale = 1 if model == "mlp" else 5
        short, long = max(args.short // scale, 2), args.long // scale
        base = None
        for variant in args.variants.split(";"):
            per_step = callgrind.per_step(lambda steps: instructions(model, variant, steps, args.warmup // scale),
                                          short, long)
            base = per_step if base is None else base
            print(f"{model:<5} {variant:<30} {per_step:>12,.0f} {per_step / base:>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
