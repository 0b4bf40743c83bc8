"""Traced (``engine.function``) against eager MLP steps in CPU instructions (valgrind callgrind): deterministic where
CPU times on a loaded machine are not.

Run ``python bench/graph_instructions.py [--root DIR] [--variants eager,traced,numpy]``. Each variant runs
``bench/graph_step.py``'s digits MLP step (64-128-10, batch 64, SGD momentum) under ``valgrind --tool=callgrind``
twice (``--short`` and ``--long`` steps after the same warm-up and a ``gc.freeze()``, one BLAS thread,
``PYTHONHASHSEED=0``); the difference of the two instruction totals over the difference of the step counts is the
cost of one step, start-up excluded. ``numpy`` is the step written by hand in NumPy with the engine's arithmetic
(``graph_step.NumpyStep``): the floor of a replay. ``traced-observed`` replays with an ``OpLog`` installed (the
observed path). ``--root`` runs another checkout's code with this driver (its bench/graph_step.py must have
``NumpyStep`` for the numpy variant).
"""
from __future__ import annotations

import argparse
import gc
import os
import sys

import callgrind

VARIANTS = ("eager", "traced", "numpy", "traced-observed")


def inner(variant: str, steps: int, warmup: int) -> None:
    """Runs inside valgrind: warm up, then ``steps`` steps of ``variant``."""
    sys.path.insert(0, os.getcwd())
    sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
    import graph_step

    import engine

    raw = graph_step.batches(10)
    data = [(engine.tensor(x), engine.tensor(y)) for x, y in raw]
    if variant == "numpy":
        step, data = graph_step.NumpyStep(graph_step.engine_model("MLP")), raw
    elif variant in VARIANTS:
        step, _ = graph_step.engine_step("MLP", traced=variant != "eager")
        if variant == "traced-observed":
            engine.hooks.add_recorder(engine.op_log.OpLog())
    else:
        raise SystemExit(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    for i in range(warmup):
        step(*data[i % len(data)])
    gc.collect()
    gc.freeze()  # what the warm-up left alive moves out of the collector's generations (see profiler_instructions)
    for i in range(steps):
        step(*data[i % len(data)])
    sys.stdout.flush()
    os._exit(0)


def instructions(root: str, variant: str, steps: int, warmup: int) -> int:
    arguments = ["--inner", variant, "--steps", str(steps), "--warmup", str(warmup)]
    return callgrind.instructions(__file__, arguments, repr(variant), cwd=root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--variants", default="eager,traced,numpy")
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=110)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner, args.steps, args.warmup)
        return 0
    print(f"# instructions per digits-MLP step (callgrind; {args.root}; steps {args.long} - {args.short})")
    print(f"{'variant':<16} {'instr/step':>12} {'vs first':>7}")
    base = None
    for variant in args.variants.split(","):
        per_step = callgrind.per_step(lambda steps: instructions(args.root, variant, steps, args.warmup),
                                      args.short, args.long)
        base = per_step if base is None else base
        print(f"{variant:<16} {per_step:>12,.0f} {per_step / base:>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
