"""Function: the base of every op — forward and backward side by side — and the grad-mode switch.

An op subclasses ``Function``, computes its result from raw arrays in ``forward`` (keeping on ``self`` only
what ``backward`` needs) and returns one array; ``backward`` receives the gradient of that result and
returns one gradient array (or None) per input. Calling an instance on Tensors runs the op, registers the
result with the allocator chokepoint and, when gradients are needed, links the result into the graph.
Ops take array functions from ``self.xp`` (NumPy, or CuPy when the inputs live on a GPU: picked once per call
from the inputs, after checking they share one device), so one definition runs on both backends.
With a memory limit set, ``output_nbytes`` (the result's size from the inputs' shapes and dtypes) is checked
against it before ``forward`` runs; a ``MemoryError`` from NumPy inside the op becomes ``OutOfMemoryError``.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable

import numpy as np

from engine import hooks as _hooks
from engine import memory as _memory
from engine.backend import cuda_backend as _cuda
from engine.backend import op_array_module as _op_array_module
from engine.tensor import Tensor

_grad_enabled = True
_now = time.perf_counter_ns


class no_grad:
    """Context manager and decorator: ops inside record no graph (like ``torch.no_grad``)."""

    def __enter__(self) -> None:
        global _grad_enabled
        self._previous, _grad_enabled = _grad_enabled, False

    def __exit__(self, *exc: object) -> None:
        global _grad_enabled
        _grad_enabled = self._previous

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class enable_grad(no_grad):
    def __enter__(self) -> None:
        global _grad_enabled
        self._previous, _grad_enabled = _grad_enabled, True


def is_grad_enabled() -> bool:
    return _grad_enabled


class Function:
    """Base class of ops; see the module docstring for the contract."""

    xp: Any = np  # the array module of this call's inputs (cupy when they live on a GPU), set by __call__
    parents: tuple[Tensor, ...] = ()
    needs_input_grad: tuple[bool, ...] = ()
    module: str = ""
    freed: bool = False

    # Facts an op declares about itself (graph passes, replay and the CUDA backend read these, never a name table):
    ufunc: tuple[Any, int] | None = None  # (NumPy ufunc, arity): the op is that one elementwise ufunc of its inputs
    saves_no_arrays: bool = False  # backward reads no array that forward saved (only shapes or nothing)
    saves_inputs: bool = True  # backward reads input arrays (False: a replay frees the inputs at once)
    keeps_output: bool = True  # forward keeps its result (False: a replay may overwrite it once it is dead)
    random: bool = False  # draws random numbers: two calls on the same inputs differ (never merged or folded)
    differentiable: bool = True  # False: the result never requires grad (comparisons); backward is never called
    cuda_kernel: str | None = None  # the kernels/<name>.cu source its CuPy branch launches (engine.backend.cuda)

    def forward(self, *arrays: Any) -> Any:
        raise NotImplementedError

    def backward(self, grad: Any) -> tuple[Any, ...]:
        raise NotImplementedError(f"{type(self).__name__} has no gradient")

    def replay_kernel(self, node: Any) -> Callable[..., Any] | None:
        """A replacement for ``node.run`` (this op's forward or backward node in a traced graph) with the branches
        the trace fixed decided once, computing the same bits; None: replay calls the op itself."""
        return None

    def output_nbytes(self, *arrays: Any) -> int | None:
        """The bytes of the new buffer ``forward(*arrays)`` will return (0 for a view of an input), from shapes and
        dtypes alone, or None when not known beforehand (the result is then checked once computed). Never more
        than the result's real size: it is checked against the memory limit before ``forward`` runs."""
        return None

    @property
    def name(self) -> str:
        return type(self).__name__

    def __call__(self, *inputs: Tensor) -> Tensor:
        needs_grad = _grad_enabled and any(t.requires_grad for t in inputs)
        if _hooks.call_hooks_due:  # recorders watch ops, or this op opens the step
            if _hooks.ops_observed:
                return self._call_observed(inputs, needs_grad)
            _hooks.begin_step_at_op()
        arrays = [t._data for t in inputs]
        if _cuda.in_use:
            self.xp = _op_array_module(type(self).__name__, arrays, _hooks.module_stack[-1])
        if _memory.limit_set:
            self._check_room(arrays)
        try:
            out = self.forward(*arrays)
        except MemoryError as error:
            raise self._refused(error, arrays)
        if type(out) is not np.ndarray:
            out = np.asarray(out) if np.isscalar(out) or isinstance(out, np.generic) else out
        return self._wrap(out, inputs, needs_grad)

    def _check_room(self, arrays: list[Any]) -> None:
        """Refuse the op before it computes anything when its output would exceed the memory limit."""
        try:
            nbytes = self.output_nbytes(*arrays)
        except Exception:  # noqa: BLE001 - bad shapes or arguments: forward raises its own, clearer error
            return
        if nbytes and arrays:
            _memory.check_room(nbytes, arrays[0], type(self).__name__)

    def _refused(self, error: MemoryError, arrays: list[Any]) -> MemoryError:
        """NumPy's ``MemoryError`` inside ``forward`` as an ``OutOfMemoryError`` naming this op."""
        try:
            expected = self.output_nbytes(*arrays)
        except Exception:  # noqa: BLE001 - the size is a detail of the report
            expected = None
        return _memory.refused_by_system(error, type(self).__name__, arrays[0] if arrays else None, expected)

    def _wrap(self, out: Any, inputs: tuple[Tensor, ...], needs_grad: bool) -> Tensor:
        key = _memory.register(out, "activation", type(self).__name__)
        result = Tensor.__new__(Tensor)
        result._data, result._mem_key, result.grad, result.name = out, key, None, None
        if needs_grad and self.differentiable:
            self.parents = inputs
            self.needs_input_grad = tuple(t.requires_grad for t in inputs)
            self.module = _hooks.module_stack[-1]
            result.requires_grad, result._ctx = True, self
        else:
            result.requires_grad, result._ctx = False, None
        return result

    def _call_observed(self, inputs: tuple[Tensor, ...], needs_grad: bool) -> Tensor:
        """``__call__`` through the dispatch core (``engine.hooks``): the step opened if it is not, then ``call_begin``
        and ``op_begin`` before the op computes, ``call`` and ``op`` after its result is registered."""
        _hooks.begin_step_at_op()
        arrays = [t._data for t in inputs]
        name, module = type(self).__name__, _hooks.module_stack[-1]
        if _cuda.in_use:
            self.xp = _op_array_module(name, arrays, module)
        if _memory.limit_set:
            self._check_room(arrays)
        if _hooks.call_begin:
            _hooks.emit(_hooks.call_begin, self, inputs)
        if _hooks.op_begin:
            _hooks.record_op_begin(name, module, arrays)
        start_ns = _now()
        try:
            out = self.forward(*arrays)
        except MemoryError as error:
            raise self._refused(error, arrays)
        if type(out) is not np.ndarray and (np.isscalar(out) or isinstance(out, np.generic)):
            out = np.asarray(out)
        result = self._wrap(out, inputs, needs_grad)
        if _hooks.call:
            _hooks.emit(_hooks.call, self, inputs, result)
        _hooks.record_op(name, module, arrays, (out,), start_ns)
        return result
