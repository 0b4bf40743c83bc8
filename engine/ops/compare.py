"""Comparisons (results carry no gradient) and ``where``, which routes the gradient by a condition."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine import hooks as _hooks
from engine import memory as _memory
from engine.backend import cuda_backend as _cuda
from engine.backend import get_array_module, op_array_module
from engine.graph import trace as _trace
from engine.op import Function
from engine.ops._util import as_tensor, broadcast_shape, result_dtype, shape_nbytes, unbroadcast
from engine.tensor import Tensor


def _compare(name: str, a: Any, b: Any) -> Tensor:
    a_t = a if isinstance(a, Tensor) else None
    b = as_tensor(b, a_t)
    a = as_tensor(a, b)
    xp = op_array_module(name, (a._data, b._data), _hooks.module_stack[-1]) if _cuda.in_use else np
    ufunc = getattr(xp, name)
    try:
        if _memory.limit_set:  # NOTE: not a Function (no gradient): its output is checked here, as __call__ does
            _memory.check_room(shape_nbytes(broadcast_shape(a.shape, b.shape), np.bool_), a._data, name)
        out = ufunc(a._data, b._data)
    except ValueError:
        raise ValueError(f"{name}: shapes {a.shape} and {b.shape} cannot be broadcast together") from None
    except MemoryError as error:
        raise _memory.refused_by_system(error, name, a._data)
    result = Tensor._wrap_array(xp.asarray(out), "activation", name)
    if _trace.active is not None:  # engine.function is recording: a comparison is a graph node too
        _trace.active.record_plain(name, ufunc, (a, b), result)
    return result


def less(a: Any, b: Any) -> Tensor:
    return _compare("less", a, b)


def less_equal(a: Any, b: Any) -> Tensor:
    return _compare("less_equal", a, b)


def greater(a: Any, b: Any) -> Tensor:
    return _compare("greater", a, b)


def greater_equal(a: Any, b: Any) -> Tensor:
    return _compare("greater_equal", a, b)


def equal(a: Any, b: Any) -> Tensor:
    return _compare("equal", a, b)


def not_equal(a: Any, b: Any) -> Tensor:
    return _compare("not_equal", a, b)


class Where(Function):
    def __init__(self, condition: np.ndarray) -> None:
        self.condition = condition

    def forward(self, a, b):
        self.a_shape, self.b_shape = a.shape, b.shape
        return self.xp.where(self.condition, a, b)

    def output_nbytes(self, a, b):
        return shape_nbytes(broadcast_shape(self.condition.shape, a.shape, b.shape), result_dtype(a, b))

    def backward(self, grad):
        xp = self.xp
        zero = xp.zeros((), dtype=grad.dtype)
        ga = unbroadcast(xp.where(self.condition, grad, zero), self.a_shape) if self.needs_input_grad[0] else None
        gb = unbroadcast(xp.where(self.condition, zero, grad), self.b_shape) if self.needs_input_grad[1] else None
        return ga, gb


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Elements of ``a`` where ``condition`` holds, else of ``b`` (broadcast together)."""
    cond = condition._data if isinstance(condition, Tensor) else condition
    a_t = a if isinstance(a, Tensor) else None
    b = as_tensor(b, a_t)
    a = as_tensor(a, b)
    xp = get_array_module(a._data, b._data)
    if not isinstance(condition, Tensor) and (xp is not np or type(cond) is not np.ndarray):
        cond = xp.asarray(cond)  # a plain (host) condition goes to the operands' device; a Tensor's must be there
    if _cuda.in_use:
        op_array_module("where", (cond, a._data, b._data), _hooks.module_stack[-1])
    try:
        return Where(cond.astype(bool, copy=False))(a, b)
    except ValueError as error:
        if "broadcast" not in str(error):
            raise
        raise ValueError(f"where: condition {cond.shape}, a {a.shape} ({a.dtype}) and b {b.shape} ({b.dtype}) "
                         "cannot be broadcast together") from None
