"""Counting a benchmark step in CPU instructions under valgrind callgrind: the driver shared by
``bench/*_instructions.py``.

A script runs its own ``--inner`` mode under callgrind twice, with a short and a long number of steps after the
same warm-up; the difference of the two instruction totals over the difference of the step counts is the cost of
one step, start-up excluded. One BLAS thread and ``PYTHONHASHSEED=0`` keep the count repeatable.
"""
from __future__ import annotations

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
