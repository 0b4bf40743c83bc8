"""Gradient averaging for DistributedDataParallel: flat buckets, each AllReduced as soon as all its parameters'
gradients are final during backward, all waited for before the optimizer updates a parameter.

Buckets hold parameters in reverse order (the order backward finishes them), at most ``cap_bytes`` each (a larger
parameter gets a bucket of its own) and one dtype each. A post-accumulate-grad hook copies a finished gradient into
its bucket's flat buffer (and makes ``.grad`` a view of it); a complete bucket is handed to this reducer's
communication thread, which AllReduces the buckets one after the other, blocking, on a communicator of its own, while
backward goes on (measured against non-blocking ``Iallreduce`` + ``Test`` on the training thread, which MPI over
shared memory progresses only inside MPI calls: docs/distributed.md, *Speed*). Buckets are launched strictly in
index order (every rank must issue the same collectives in the same order), so a complete bucket waits while an
earlier one is not. ``finish()`` launches what is left (a parameter without a gradient this step contributes
zeros), waits, and leaves the averages in ``.grad``.
"""
from __future__ import annotations

import queue
import threading
import time
import weakref
from typing import Any

import numpy as np

from engine import hooks as _hooks
from engine.backend import cuda_backend, is_device_array
from engine.distributed.collectives import report
from engine.distributed.staging import copy_from_host, host_copy
from engine.tensor import Tensor

_now = time.perf_counter_ns


class GradientSyncError(_hooks.PropagatingError, RuntimeError):
    """The gradients could not be averaged over the ranks: training must stop (it passes through ``engine.hooks``,
    where DDP waits as a ``before_update`` recorder)."""


def _communicate(comm: Any, mpi: Any, work: queue.SimpleQueue) -> None:
    """The communication thread: AllReduce (sum, in place) each bucket put in ``work``, in order; None stops it.
    An MPI error is kept on the bucket and raised by ``finish()`` on the training thread."""
    while (bucket := work.get()) is not None:
        try:
            comm.Allreduce(mpi.IN_PLACE, bucket.flat, mpi.SUM)
        except BaseException as error:  # noqa: BLE001 - handed to the training thread
            bucket.error = error
        bucket.end_ns = _now()
        bucket.done.set()


class Bucket:
    """Parameters whose gradients travel in one flat buffer: ``offsets[i]`` is where ``params[i]`` starts."""

    def __init__(self, index: int, params: list[Tensor]) -> None:
        self.index = index
        self.params = params
        self.offsets = list(np.cumsum([0] + [p.size for p in params[:-1]]))
        self.numel = sum(p.size for p in params)
        self.dtype = params[0].dtype
        self.nbytes = self.numel * self.dtype.itemsize
        self.flat: Any = None  # allocated at first use, on the host unless MPI takes device buffers
        self.ready = [False] * len(params)
        self.grads: list[Tensor | None] = [None] * len(params)  # .grad as a view of ``flat`` (same array type)
        self.ready_count = 0
        self.done = threading.Event()  # set by the communication thread when the AllReduce completed
        self.error: BaseException | None = None
        self.start_ns = self.end_ns = 0

    def view(self, slot: int) -> Any:
        start = self.offsets[slot]
        return self.flat[start:start + self.params[slot].size]


def make_buckets(params: list[Tensor], cap_bytes: int) -> list[Bucket]:
    """Consecutive runs of ``reversed(params)`` of one dtype and at most ``cap_bytes`` (at least one parameter)."""
    runs: list[list[Tensor]] = []
    nbytes = 0
    for p in reversed(params):
        size = p.size * p.dtype.itemsize
        if not runs or runs[-1][0].dtype != p.dtype or nbytes + size > cap_bytes:
            runs.append([])
            nbytes = 0
        runs[-1].append(p)
        nbytes += size
    return [Bucket(i, run) for i, run in enumerate(runs)]


def _weak_hook(method: Any) -> Any:
    """A hook calling ``method`` while its object lives: the parameters' hooks do not keep the reducer alive."""
    reference = weakref.WeakMethod(method)

    def hook(p: Tensor) -> None:
        found = reference()
        if found is not None:
            found(p)
    return hook


class Reducer:
    """The bucketed AllReduce of one DistributedDataParallel model over ``group`` (a process group of > 1 ranks)."""

    def __init__(self, params: list[Tensor], group: Any, cap_bytes: int) -> None:
        self.group = group
        self.buckets = make_buckets(params, cap_bytes)
        self.slot_of = {id(p): (bucket, slot) for bucket in self.buckets for slot, p in enumerate(bucket.params)}
        self.enabled = True  # False inside no_sync(): gradients accumulate locally
        self.active = False  # a gradient was marked ready since the last finish()
        self.next_bucket = 0  # the next bucket to launch
        self.outstanding: list[Bucket] = []  # launched, not waited for yet
        self.handles = [p.register_post_accumulate_grad_hook(_weak_hook(self.grad_ready)) for p in params]
        self.work: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=_communicate, args=(group.comm.Dup(), group.MPI, self.work), daemon=True,
                         name="engine-ddp-communication").start()
        weakref.finalize(self, self.work.put, None)  # the thread ends with its reducer

    def remove_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()

    # --- during backward -------------------------------------------------------------------------------------

    def grad_ready(self, p: Tensor) -> None:
        """The post-accumulate-grad hook: ``p.grad`` is final for this backward."""
        if not self.enabled:
            return
        bucket, slot = self.slot_of[id(p)]
        if bucket.ready[slot]:
            raise RuntimeError(f"DistributedDataParallel: the parameter of shape {p.shape} (bucket {bucket.index}) got "
                               "a gradient twice before the optimizer step; run one backward per step, or wrap the "
                               "accumulation backwards in ddp.no_sync()")
        if bucket.flat is None:
            self._allocate(bucket, p.grad._data)
        in_bucket = bucket.grads[slot]
        if p.grad is not in_bucket:  # (else backward accumulated into the bucket itself)
            grad, view = p.grad._data, bucket.view(slot)
            if type(view) is type(grad):  # .grad becomes a view of the bucket: the average lands there in place
                view[...] = grad.reshape(-1)
                if in_bucket is None:
                    in_bucket = bucket.grads[slot] = Tensor._wrap_array(view.reshape(p.shape), "gradient", "grad")
                p.grad = in_bucket
            else:  # staged: a device gradient, a host bucket
                view[...] = host_copy(grad).reshape(-1)
        bucket.ready[slot] = True
        bucket.ready_count += 1
        self.active = True
        if bucket.ready_count == len(bucket.params):
            self._launch_ready()

    def _allocate(self, bucket: Bucket, like: Any) -> None:
        on_device = self.group.cuda_aware and is_device_array(like)
        xp = cuda_backend.cupy if on_device else np
        bucket.flat = xp.zeros(bucket.numel, dtype=bucket.dtype)

    def _launch_ready(self) -> None:
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].ready_count == len(
                buckets[self.next_bucket].params):
            self._launch(buckets[self.next_bucket])

    def _launch(self, bucket: Bucket) -> None:
        bucket.start_ns = _now()
        bucket.done.clear()
        self.work.put(bucket)
        self.outstanding.append(bucket)
        self.next_bucket += 1

    # --- before the optimizer step -------------------------------------------------------------------------

    def finish(self) -> None:
        """Launch the buckets not launched yet, wait for all, write the averaged gradients; report."""
        if not self.active:
            return
        start_ns = _now()
        for bucket in self.buckets[self.next_bucket:]:
            if bucket.flat is None:
                self._allocate(bucket, bucket.params[0]._data)
            for slot, ready in enumerate(bucket.ready):
                if not ready:  # no gradient on this rank this step (an unused parameter): contribute zeros
                    bucket.view(slot)[...] = 0
            self._launch(bucket)
        for bucket in self.outstanding:
            bucket.done.wait()
        self.outstanding.clear()
        failed = next((b for b in self.buckets if b.error is not None), None)
        if failed is not None:
            error, failed.error = failed.error, None
            self._reset()
            raise GradientSyncError(f"DistributedDataParallel: the AllReduce of gradient bucket {failed.index} "
                                    f"failed: {error}") from error
        wait_ns = _now() - start_ns
        scale = 1.0 / self.group.size
        for bucket in self.buckets:
            bucket.flat *= bucket.dtype.type(scale)
            for slot, p in enumerate(bucket.params):
                if p.grad is None or p.grad is not bucket.grads[slot]:
                    self._write_grad(p, bucket.view(slot))
        self._report(start_ns, wait_ns)
        self._reset()

    @staticmethod
    def _write_grad(p: Tensor, average: Any) -> None:
        if p.grad is None:
            xp = cuda_backend.cupy if is_device_array(p._data) else np
            p.grad = Tensor._wrap_array(xp.zeros_like(p._data), "gradient", "grad")
        if type(average) is type(p.grad._data):
            p.grad._data[...] = average.reshape(p.shape)
        else:
            copy_from_host(p.grad._data, average)

    def _report(self, start_ns: int, wait_ns: int) -> None:
        for bucket in self.buckets:
            report("allreduce", bucket.index, bucket.nbytes, bucket.start_ns, bucket.end_ns)
        if _hooks.comm_wait:
            _hooks.emit(_hooks.comm_wait, _hooks.CommWaitEvent(
                _hooks.current_step(), start_ns, wait_ns, sum(b.nbytes for b in self.buckets), len(self.buckets)))

    def _reset(self) -> None:
        for bucket in self.buckets:
            bucket.ready = [False] * len(bucket.params)
            bucket.ready_count = 0
        self.next_bucket = 0
        self.active = False
