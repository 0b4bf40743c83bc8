"""Comparisons (Functions whose boolean results carry no gradient) and ``where``, which routes the gradient by a
condition."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine import hooks as _hooks
from engine.backend import cuda_backend as _cuda
from engine.backend import get_array_module, op_array_module
from engine.op import Function
from engine.ops._util import as_tensor, broadcast_shape, result_dtype, shape_nbytes, unbroadcast
from engine.tensor import Tensor


class _Comparison(Function):
    """``ufunc`` of two arrays, broadcast: a bool array, outside the autograd graph (``differentiable = False``)."""

    differentiable, saves_no_arrays, saves_inputs, keeps_output = False, True, False, False

    def forward(self, a, b):
        return getattr(self.xp, self.ufunc[0].__name__)(a, b)

    def output_nbytes(self, a, b):
        return shape_nbytes(broadcast_shape(a.shape, b.shape), np.bool_)


class Less(_Comparison):
    ufunc = (np.less, 2)


class LessEqual(_Comparison):
    ufunc = (np.less_equal, 2)


class Greater(_Comparison):
    ufunc = (np.greater, 2)


class GreaterEqual(_Comparison):
    ufunc = (np.greater_equal, 2)


class Equal(_Comparison):
    ufunc = (np.equal, 2)


class NotEqual(_Comparison):
    ufunc = (np.not_equal, 2)


def _compare(op: type[_Comparison], a: Any, b: Any) -> Tensor:
    a_t = a if isinstance(a, Tensor) else None
    b = as_tensor(b, a_t)
    a = as_tensor(a, b)
    try:
        return op()(a, b)
    except ValueError as error:
        if "broadcast" not in str(error) and "operands could not" not in str(error):
            raise
        raise ValueError(f"{op.ufunc[0].__name__}: shapes {a.shape} and {b.shape} cannot be broadcast together") \
            from None


def less(a: Any, b: Any) -> Tensor:
    return _compare(Less, a, b)


def less_equal(a: Any, b: Any) -> Tensor:
    return _compare(LessEqual, a, b)


def greater(a: Any, b: Any) -> Tensor:
    return _compare(Greater, a, b)


def greater_equal(a: Any, b: Any) -> Tensor:
    return _compare(GreaterEqual, a, b)


def equal(a: Any, b: Any) -> Tensor:
    return _compare(Equal, a, b)


def not_equal(a: Any, b: Any) -> Tensor:
    return _compare(NotEqual, a, b)


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
