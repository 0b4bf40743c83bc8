"""Counting a benchmark step in CPU instructions under valgrind callgrind: the driver shared by
``bench/*_instructions.py``.

A script runs its own ``--inner`` mode under callgrind twice, with a short and a long number of steps after the
same warm-up; the difference of the two instruction totals over the difference of the step counts is the cost of
one step, start-up excluded. One BLAS thread and ``PYTHONHASHSEED=0`` keep the count repeatable.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Callable

_COLLECTED = re.compile(rb"Collected : (\d+)")
_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def instructions(script: str, arguments: list[str], label: str, cwd: str | None = None) -> int:
    """Instructions of ``python script *arguments`` (all threads) under callgrind."""
    with tempfile.TemporaryDirectory() as scratch:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out", sys.executable,
                   os.path.abspath(script), *arguments]
        done = subprocess.run(command, cwd=cwd, env=dict(os.environ, **_ONE_THREAD), capture_output=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run of {label} failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace')[-2000:]}")
    return int(found.group(1))


def per_step(count: Callable[[int], int], short: int, long: int) -> float:
    """Instructions of one step from ``count(steps)``, the total of a run of that many steps."""
    return (count(long) - count(short)) / (long - short)


def main(script: str, doc: str, variants: tuple[str, ...], inner: Callable[[str, int, int], None],
         default_variants: str | None = None, warmup: int = 30) -> int:
    """The command line of a script whose variants run ``inner(variant, steps, warmup)`` in a checkout (``--root``):
    a table of instructions per step, and each variant against the first."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(script))))
    parser.add_argument("--variants", default=default_variants or ",".join(variants))
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=110)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner, args.steps, args.warmup)
        return 0

    def count(variant: str, steps: int) -> int:
        arguments = ["--inner", variant, "--steps", str(steps), "--warmup", str(args.warmup)]
        return instructions(script, arguments, repr(variant), cwd=args.root)

    print(f"# instructions per digits-MLP step (callgrind; {args.root}; steps {args.long} - {args.short})")
    print(f"{'variant':<16} {'instr/step':>12} {'vs first':>10} {'ratio':>7}")
    base = None
    for variant in args.variants.split(","):
        step = per_step(lambda steps: count(variant, steps), args.short, args.long)
        base = step if base is None else base
        print(f"{variant:<16} {step:>12,.0f} {step - base:>+10,.0f} {step / base:>7.3f}", flush=True)
    return 0
