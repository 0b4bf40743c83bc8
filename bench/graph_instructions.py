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


if __name__ == "__main__":
    sys.exit(callgrind.main(__file__, __doc__, VARIANTS, inner, default_variants="eager,traced,numpy", warmup=20))
