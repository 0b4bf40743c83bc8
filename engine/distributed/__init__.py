"""Data-parallel training on MPI (mpi4py, optional: ``pip install 'flowscope[mpi]'``); see docs/distributed.md.

``import engine.distributed`` works without mpi4py: until ``init()`` the process is a group of one (rank 0 of 1)
and the collectives are identity operations.
"""
from __future__ import annotations

from typing import Any

from engine.distributed.collectives import all_gather, all_reduce, barrier, broadcast
from engine.distributed.process_group import init, is_initialized, rank, world_size

_LATER = {"DistributedDataParallel": "engine.distributed.ddp", "at_abort": "engine.distributed.failure"}


def __getattr__(name: str) -> Any:
    """DDP and the abort machinery are imported on first use: ``import engine`` does not pay for them."""
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.distributed' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = ["DistributedDataParallel", "all_gather", "all_reduce", "at_abort", "barrier", "broadcast", "init",
           "is_initialized", "rank", "world_size"]
