"""Data-parallel training on MPI (mpi4py, optional: ``pip install 'flowscope[mpi]'``); see docs/distributed.md.

``import engine.distributed`` works without mpi4py: until ``init()`` the process is a group of one (rank 0 of 1)
and the collectives are identity operations.
"""
from __future__ import annotations

from engine.distributed.collectives import all_gather, all_reduce, barrier, broadcast
from engine.distributed.ddp import DistributedDataParallel
from engine.distributed.failure import at_abort
from engine.distributed.process_group import init, is_initialized, rank, world_size

__all__ = ["DistributedDataParallel", "all_gather", "all_reduce", "at_abort", "barrier", "broadcast", "init",
           "is_initialized", "rank", "world_size"]
