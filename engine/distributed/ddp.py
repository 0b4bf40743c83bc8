"""DistributedDataParallel: one replica of the model per rank, gradients averaged over the ranks every step."""
from __future__ import annotations

import contextlib
import weakref
from typing import Any, Iterator

import numpy as np

from engine import hooks as _hooks
from engine.distributed import collectives, process_group as _pg
from engine.distributed.reducer import GradientSyncError, Reducer
from engine.distributed.staging import copy_from_host, host_copy
from engine.nn.module import Module
from engine.tensor import Tensor

MIB = 1 << 20


class DistributedDataParallel:
    """Wrap ``module`` for data-parallel training, as PyTorch's ``DistributedDataParallel``.

    At construction every parameter and buffer is overwritten with rank 0's values. Call the wrapper for the
    forward; give the optimizer ``ddp.parameters()`` (the wrapped model's own parameters). During backward each
    bucket of at most ``bucket_cap_mb`` MiB of gradients is AllReduced on a communication thread as soon as all its
    gradients are final; ``optimizer.step()`` waits for all of them and finds ``.grad`` averaged over the ranks
    before it updates anything. ``broadcast_buffers``: rank 0's buffers (BatchNorm statistics) are broadcast before
    every forward. Unlike PyTorch the wrapper is not a Module of its own: ``named_parameters()`` and ``state_dict()``
    are the wrapped model's (no "module." prefix), so a checkpoint loads into the bare model.
    Without ``engine.distributed.init()`` (or with one rank) the wrapper only forwards.
    """

    def __init__(self, module: Module, bucket_cap_mb: float = 25, broadcast_buffers: bool = True) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps an engine.nn.Module, got {type(module).__name__}")
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or not bucket_cap_mb > 0:
            raise ValueError(f"bucket_cap_mb must be a positive number of MiB, got {bucket_cap_mb!r}")
        self.module = module
        self.bucket_cap_mb = bucket_cap_mb
        self.broadcast_buffers = bool(broadcast_buffers)
        self._reducer: Reducer | None = None
        group = _pg.group
        if group is None or group.size == 1:
            return
        params = [p for p in module.parameters() if p.requires_grad]
        _broadcast_flat(list(module.parameters()) + list(module.buffers()))
        if params:
            self._reducer = Reducer(params, group, max(1, int(bucket_cap_mb * MIB)))
            waiter = _hooks.add_recorder(_WaitBeforeUpdate(self))
            weakref.finalize(self, _hooks.remove_recorder, waiter)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._reducer is not None and self._reducer.active:  # a backward whose step never came: settle it
            self._reducer.finish()
        if self.broadcast_buffers and self._reducer is not None:
            _broadcast_flat(list(self.module.buffers()))
        return self.module(*args, **kwargs)

    forward = __call__

    def finish_gradient_sync(self) -> None:
        """Wait for the outstanding AllReduces now and write the averaged gradients (``optimizer.step()`` does it
        itself; call this to read averaged gradients between backward and step, e.g. to clip them)."""
        if self._reducer is not None:
            self._reducer.finish()

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards inside accumulate gradients locally without communication (gradient accumulation); the first
        backward after the block averages the accumulated gradients."""
        reducer = self._reducer
        if reducer is None:
            yield
            return
        previous, reducer.enabled = reducer.enabled, False
        try:
            yield
        finally:
            reducer.enabled = previous

    @property
    def bucket_sizes_bytes(self) -> list[int]:
        """The flat buckets' sizes, in launch order (empty without a process group of several ranks)."""
        return [] if self._reducer is None else [b.nbytes for b in self._reducer.buckets]

    # --- the wrapped model's own API ------------------------------------------------------------------

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        return self.module.parameters(recurse)

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self.module.named_parameters(prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        return self.module.buffers(recurse)

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self.module.named_buffers(prefix, recurse)

    def state_dict(self) -> dict[str, Tensor]:
        return self.module.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> Any:
        return self.module.load_state_dict(state_dict, strict)

    def train(self, mode: bool = True) -> DistributedDataParallel:
        self.module.train(mode)
        return self

    def eval(self) -> DistributedDataParallel:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.module.zero_grad(set_to_none)

    def __getattr__(self, name: str) -> Any:  # only for names the wrapper itself lacks
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"DistributedDataParallel(bucket_cap_mb={self.bucket_cap_mb}, {self.module!r})"


class _WaitBeforeUpdate:
    """A wrapper's wait as a recorder: every ``optimizer.step()`` calls ``before_update`` (``engine.hooks``), which
    finishes the wrapper's gradient sync first. It holds the wrapper weakly and leaves the recorder list when the
    wrapper is collected; a failed sync stops the step (``GradientSyncError``)."""

    recorder_order = -3  # before the recorders of the update: its communication is the step's

    def __init__(self, ddp: DistributedDataParallel) -> None:
        self._ddp = weakref.ref(ddp)

    def before_update(self, optimizer: Any) -> None:
        ddp = self._ddp()
        if ddp is None:
            return
        try:
            ddp.finish_gradient_sync()
        except GradientSyncError:
            raise
        except Exception as error:
            raise GradientSyncError(f"DistributedDataParallel: waiting for the gradient AllReduce failed "
                                    f"({type(error).__name__}: {error})") from error


def _broadcast_flat(tensors: list[Tensor]) -> None:
    """Overwrite ``tensors`` with rank 0's values: one broadcast per dtype, through a flat host buffer."""
    by_dtype: dict[np.dtype, list[Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for dtype, group in by_dtype.items():
        flat = np.concatenate([host_copy(t._data).reshape(-1) for t in group]) if group else np.empty(0, dtype)
        collectives.broadcast(flat, root=0)
        offset = 0
        for t in group:
            copy_from_host(t._data, flat[offset:offset + t.size])
            offset += t.size
