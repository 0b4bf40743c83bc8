"""Reductions over one, several or all axes: sum, mean, max, min (and argmax, which has no gradient)."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from engine.backend import get_array_module
from engine.op import Function
from engine.ops._util import normalize_axis, shape_nbytes
from engine.tensor import Tensor


def _reduced_shape(x: np.ndarray, axis: Any, keepdims: bool, op: str) -> tuple[int, ...]:
    axes = normalize_axis(axis, x.ndim, x.shape, op)
    if axes is None:
        return (1,) * x.ndim if keepdims else ()
    return tuple(1 if i in axes else n for i, n in enumerate(x.shape) if keepdims or i not in axes)


def _expand(grad: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Reshape a reduced gradient so it broadcasts against the input of ``shape``."""
    if axes is None:
        return grad.reshape((1,) * len(shape))
    if keepdims:
        return grad
    return grad.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))


class Sum(Function):
    def __init__(self, axis: Any = None, keepdims: bool = False) -> None:
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.shape = x.shape
        self.axes = normalize_axis(self.axis, x.ndim, x.shape, self.name.lower())
        return x.sum(axis=self.axes, keepdims=self.keepdims)

    def output_nbytes(self, x):
        dtype = x.dtype if x.dtype.kind in "fc" else np.result_type(x.dtype, np.int_)  # integers sum as int64
        return shape_nbytes(_reduced_shape(x, self.axis, self.keepdims, self.name.lower()), dtype)

    def backward(self, grad):
        return (self.xp.broadcast_to(_expand(grad, self.shape, self.axes, self.keepdims), self.shape).copy(),)


class Mean(Sum):
    def forward(self, x):
        self.shape = x.shape
        self.axes = normalize_axis(self.axis, x.ndim, x.shape, self.name.lower())
        self.count = x.size if self.axes is None else int(np.prod([x.shape[a] for a in self.axes]))
        return x.mean(axis=self.axes, keepdims=self.keepdims)

    def output_nbytes(self, x):
        dtype = x.dtype if x.dtype.kind in "fc" else np.float64  # the mean of integers is float64
        return shape_nbytes(_reduced_shape(x, self.axis, self.keepdims, self.name.lower()), dtype)

    def backward(self, grad):
        (g,) = super().backward(grad)
        g /= builtins.max(self.count, 1)
        return (g,)


class Max(Function):
    """Maximum; the gradient is shared equally among tied maxima (as ``torch.amax``)."""

    reduce = "max"  # the array method (NumPy's and CuPy's)

    def __init__(self, axis: Any = None, keepdims: bool = False) -> None:
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        if x.size == 0:
            raise ValueError(f"{self.name.lower()} of an empty tensor (shape {x.shape}) has no identity")
        self.x = x
        self.axes = normalize_axis(self.axis, x.ndim, x.shape, self.name.lower())
        self.out = getattr(x, self.reduce)(axis=self.axes, keepdims=True)
        return self.out if self.keepdims else (self.out.reshape(()) if self.axes is None else
                                                self.out.squeeze(axis=self.axes))

    def output_nbytes(self, x):
        return shape_nbytes(_reduced_shape(x, self.axis, self.keepdims, self.name.lower()), x.dtype)

    def backward(self, grad):
        mask = self.x == self.out
        count = mask.sum(axis=self.axes, keepdims=True)
        return (_expand(grad, self.x.shape, self.axes, self.keepdims) * mask / count.astype(grad.dtype),)


class Min(Max):
    reduce = "min"


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Sum(axis, keepdims)(x)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Mean(axis, keepdims)(x)


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Max(axis, keepdims)(x)


def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Min(axis, keepdims)(x)


def argmax(x: Tensor, axis: Any = None) -> Tensor:
    data = x._data
    return Tensor._wrap_array(get_array_module(data).asarray(data.argmax(axis=axis)), "activation", "argmax")
