"""The process group: one MPI job (``mpiexec -n N python train.py``), its rank and size, and its communicators.

Without ``init()`` the process is a group of one: ``rank() == 0``, ``world_size() == 1``.
"""
from __future__ import annotations

import os
from typing import Any

from engine import random as _random

INSTALL_HINT = "pip install 'flowscope[mpi]'"
CUDA_AWARE_ENV = "FLOWSCOPE_MPI_CUDA_AWARE"


class _Group:
    """What ``init()`` set up: the MPI module, a duplicate of COMM_WORLD for the engine's collectives (so that a
    user's own MPI traffic never matches them), rank, size and whether device buffers may go to MPI directly."""

    def __init__(self, mpi: Any, cuda_aware: bool) -> None:
        self.MPI = mpi
        self.comm = mpi.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.cuda_aware = cuda_aware


group: _Group | None = None


YIELD_WHEN_IDLE_ENV = "OMPI_MCA_mpi_yield_when_idle"


def import_mpi() -> Any:
    """mpi4py's MPI module (initialises MPI with MPI_THREAD_MULTIPLE), or an ImportError saying how to install it."""
    # NOTE: DDP's communication thread waits inside MPI while backward runs on the same cores; Open MPI's waits spin
    # unless told to yield (read at MPI_Init, i.e. the import below), and a spinning wait takes the core from backward
    os.environ.setdefault(YIELD_WHEN_IDLE_ENV, "1")
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ImportError(f"engine.distributed needs mpi4py and an MPI library ({error}); install them with "
                          f"{INSTALL_HINT}") from error
    return MPI


def init(*, dropout_seed_per_rank: bool = True, abort_on_error: bool = True, cuda_aware: bool | None = None) -> None:
    """Join the MPI job this process was started in (``mpiexec``); a second call does nothing.

    ``dropout_seed_per_rank``: dropout masks are drawn from a generator seeded by (engine seed, rank), so replicas
    drop different units, while initialisation keeps drawing from the shared seed (``engine.random``).
    ``abort_on_error``: an uncaught exception on any rank aborts the whole job after every rank ran its ``at_abort``
    callables (``engine.distributed.failure``), instead of leaving the other ranks waiting in a collective.
    ``cuda_aware``: pass CUDA device buffers to MPI directly; default from the environment variable
    FLOWSCOPE_MPI_CUDA_AWARE=1, else device buffers are staged through host memory.
    """
    global group
    if group is not None:
        return
    mpi = import_mpi()
    if mpi.Query_thread() < mpi.THREAD_MULTIPLE:
        raise RuntimeError(f"engine.distributed needs MPI_THREAD_MULTIPLE (the abort listener is a thread); this MPI "
                           f"provides thread level {mpi.Query_thread()}")
    if cuda_aware is None:
        cuda_aware = os.environ.get(CUDA_AWARE_ENV, "") == "1"
    group = _Group(mpi, bool(cuda_aware))
    if dropout_seed_per_rank:
        _random.set_dropout_stream(group.rank)
    if abort_on_error:
        from engine.distributed import failure
        failure.install(group)


def is_initialized() -> bool:
    return group is not None


def rank() -> int:
    return group.rank if group is not None else 0


def world_size() -> int:
    return group.size if group is not None else 1
