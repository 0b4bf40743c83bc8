"""The demo's data-parallel run: ``ranks.py`` on 2 MPI ranks (``python -m engine.distributed.launch``), rank 1
sleeping as long as its compute (a share the 2-rank straggler alert holds to on a loaded 2-core machine; at 30 %
it once went unreported), so that the board's multi-rank view has a straggler to find. Skipped, in one line,
where MPI is not installed."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

RANKS = 2
SLOW_SHARE = 1.0  # rank 1 sleeps this share of its compute time each step
WORKER = Path(__file__).with_name("ranks.py")
REPO = WORKER.parents[2]  # the directory holding the instrumentation and engine packages
NO_MPI = "skipped: no MPI here (pip install 'flowscope[mpi]' brings mpi4py and Open MPI)"
LAUNCHER_NOT_FOUND = 127  # engine.distributed.launch's exit code when it finds no mpiexec


def straggler(run_dir: str, seed: int, steps: int = 120) -> str:
    """Train the job into ``run_dir/rank0`` and ``run_dir/rank1``; the outcome, or why it was skipped."""
    if importlib.util.find_spec("mpi4py") is None:
        return NO_MPI
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "engine.distributed.launch", "-n", str(RANKS), str(WORKER), "--logdir", run_dir,
           "--steps", str(steps), "--batch", "256", "--slow-rank", "1", "--slow-share", str(SLOW_SHARE), "--profile",
           "--seed", str(seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode == LAUNCHER_NOT_FOUND:
        return NO_MPI
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"the {RANKS}-rank job failed (exit {done.returncode}): {' | '.join(tail)}"
    return f"{RANKS} ranks, rank 1 sleeping {SLOW_SHARE:.0%} of its compute"
