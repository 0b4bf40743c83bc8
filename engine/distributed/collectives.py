"""Blocking collectives over the process group, each reported to ``communication`` recorders as a ``CommEvent``.

Without ``init()`` (a group of one) they are identity operations and report nothing.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine import hooks as _hooks
from engine.distributed import process_group as _pg
from engine.distributed.staging import Staged
from engine.tensor import Tensor

OPS = ("sum", "mean", "max", "min")
_MAX_DIMS = 32
_now = time.perf_counter_ns


def report(name: str, bucket: int, nbytes: int, start_ns: int, end_ns: int) -> None:
    """Emit one ``CommEvent`` to the ``communication`` recorders (the training thread's step)."""
    if _hooks.communication:
        _hooks.emit(_hooks.communication,
                    _hooks.CommEvent(name, bucket, nbytes, start_ns, end_ns, _hooks.current_step()))


def _array_of(x: Any, fn: str) -> Any:
    if isinstance(x, Tensor):
        return x._data
    if isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__"):
        return x
    raise TypeError(f"{fn} takes an engine Tensor or an array (NumPy or CuPy), got {type(x).__name__}")


def _mpi_op(group: Any, op: str) -> Any:
    mpi = group.MPI
    return {"sum": mpi.SUM, "mean": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}[op]


def all_reduce(x: Any, op: str = "sum") -> Any:
    """Reduce ``x`` (Tensor or array) element-wise over all ranks, in place; returns ``x``. ``op``: "sum", "mean",
    "max" or "min" ("mean" needs a floating-point array)."""
    array = _array_of(x, "all_reduce")
    if op not in OPS:
        raise ValueError(f"all_reduce: op must be one of {', '.join(OPS)}, got {op!r}")
    if op == "mean" and array.dtype.kind not in "fc":
        raise TypeError(f"all_reduce(op='mean') needs a floating-point array, got dtype {array.dtype}")
    group = _pg.group
    if group is None:
        return x
    mpi_op = _mpi_op(group, op)
    staged = Staged(array, group.cuda_aware)
    start_ns = _now()
    group.comm.Allreduce(group.MPI.IN_PLACE, staged.buffer, mpi_op)
    if op == "mean":
        staged.buffer /= group.size
    staged.finish()
    report("allreduce", -1, array.nbytes, start_ns, _now())
    return x


def broadcast(x: Any, root: int = 0) -> Any:
    """Overwrite ``x`` (Tensor or array) on every rank with rank ``root``'s values, in place; returns ``x``."""
    array = _array_of(x, "broadcast")
    size = _pg.world_size()
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ValueError(f"broadcast: root must be a rank in [0, {size}), got {root!r}")
    group = _pg.group
    if group is None:
        return x
    staged = Staged(array, group.cuda_aware)
    start_ns = _now()
    group.comm.Bcast(staged.buffer, root=int(root))
    staged.finish()
    report("broadcast", -1, array.nbytes, start_ns, _now())
    return x


def all_gather(x: Any) -> np.ndarray:
    """Every rank's ``x`` stacked in rank order: a new host array of shape ``(world_size, *x.shape)``. All ranks
    must pass the same shape and dtype (checked: a ValueError on every rank otherwise)."""
    array = _array_of(x, "all_gather")
    group = _pg.group
    host = Staged(array, False).buffer  # a contiguous host array
    if group is None:
        return np.array(host)[None]
    if host.ndim > _MAX_DIMS:
        raise ValueError(f"all_gather: arrays of at most {_MAX_DIMS} dimensions, got shape {host.shape}")
    signature = np.full(_MAX_DIMS + 2, -1, dtype=np.int64)  # dtype, ndim, shape padded with -1
    signature[:2 + host.ndim] = [host.dtype.num, host.ndim, *host.shape]
    signatures = np.empty((group.size, len(signature)), dtype=np.int64)
    start_ns = _now()
    group.comm.Allgather(signature, signatures)
    if not (signatures == signatures[0]).all():
        differing = [r for r in range(group.size) if not (signatures[r] == signature).all()]
        raise ValueError(f"all_gather: rank {group.rank} passed shape {host.shape} dtype {host.dtype}, ranks "
                         f"{differing} passed a different shape or dtype; every rank must pass the same")
    out = np.empty((group.size, *host.shape), dtype=host.dtype)
    group.comm.Allgather(host, out)
    report("all_gather", -1, out.nbytes, start_ns, _now())
    return out


def barrier() -> None:
    """Wait until every rank reached this call."""
    group = _pg.group
    if group is None:
        return
    start_ns = _now()
    group.comm.Barrier()
    report("barrier", -1, 0, start_ns, _now())
