"""Memory tracker cost per step in CPU instructions (valgrind callgrind): deterministic where wall times are not.

Run ``python bench/memory_instructions.py [--root DIR] [--variants off,stacks_off,stacks_on,stacks_off_no_rss]``.
Each variant runs the tiny digits-MLP step of ``bench/memory_overhead.py`` (64-128-10, batch 64, Adam) under ``valgrind
--tool=callgrind`` twice (``--short`` and ``--long`` steps after the same warm-up and a ``gc.freeze()``, one BLAS
thread, ``PYTHONHASHSEED=0``, a real ``SummaryWriter`` flushed at the end so its thread's work is counted); the
difference of the two instruction totals divided by the difference of the step counts is the cost of one step,
start-up excluded. The tracker runs with its defaults except ``batch_s`` and ``host_every_s`` (time-driven work
would depend on valgrind's slowdown); ``--every k`` fixes its logging interval (the budget's choice depends on the
timing under valgrind: compare two trees with it). ``--root`` runs another checkout's code (e.g. a copy of the tree
before a change) with this driver.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile

import callgrind

# stacks_off_no_rss: no host RSS reads, whose leak window (40 reads, one per batch) keeps every step end until it
# is full: with it the tracker reaches its steady state (one step end kept in k) within the warm-up here
VARIANTS = ("off", "stacks_off", "stacks_on", "stacks_off_no_rss")


def inner(variant: str, steps: int, warmup: int, every: int | None) -> None:
    """Runs inside valgrind: warm up, then ``steps`` steps of ``variant``."""
    sys.path.insert(0, os.getcwd())
    sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
    from memory_overhead import make_step

    from instrumentation import MemoryTracker, SummaryWriter

    step = make_step((128,), 64)
    with tempfile.TemporaryDirectory() as logdir:
        writer = SummaryWriter(logdir)
        if variant in ("stacks_off", "stacks_on", "stacks_off_no_rss"):
            MemoryTracker(writer, stacks=variant == "stacks_on", batch_s=1e9, host_every_s=1e9, every=every,
                          host_rss=variant != "stacks_off_no_rss")
        elif variant != "off":
            raise SystemExit(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
        for _ in range(warmup):
            step()
        writer.flush()
        # NOTE: what is alive after the warm-up moves out of the collector's generations (see profiler_instructions)
        gc.collect()
        gc.freeze()
        for _ in range(steps):
            step()
        writer.flush()
        sys.stdout.flush()
        os._exit(0)


def instructions(root: str, variant: str, steps: int, warmup: int, every: int | None) -> int:
    arguments = ["--inner", variant, "--steps", str(steps), "--warmup", str(warmup)]
    return callgrind.instructions(__file__, arguments + (["--every", str(every)] if every is not None else []),
                                  repr(variant), cwd=root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--short", type=int, default=40)
    parser.add_argument("--long", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=80)
    parser.add_argument("--every", type=int, default=None,
                        help="the trackers' every=k (a fixed interval: the budget's choice depends on the machine)")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner, args.steps, args.warmup, args.every)
        return 0
    print(f"# instructions per digits-MLP step (callgrind; {args.root}; steps {args.long} - {args.short}; "
          f"every={args.every})")
    print(f"{'variant':<12} {'instr/step':>12} {'vs off':>10} {'ratio':>7}")
    base = None
    for variant in args.variants.split(","):
        per_step = callgrind.per_step(lambda steps: instructions(args.root, variant, steps, args.warmup, args.every),
                                      args.short, args.long)
        base = per_step if base is None else base
        print(f"{variant:<12} {per_step:>12,.0f} {per_step - base:>+10,.0f} {per_step / base:>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
