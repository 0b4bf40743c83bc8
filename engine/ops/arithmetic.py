"""Elementwise arithmetic with NumPy broadcasting, and matrix multiplication."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine import config as _config
from engine.op import Function
from engine.ops._util import (as_tensor, broadcast_error, broadcast_shape, elementwise_nbytes, errstate,
                              result_dtype, shape_nbytes, unbroadcast)
from engine.tensor import Tensor


class _Binary(Function):
    symbol = "?"
    output_nbytes = elementwise_nbytes

    def __call__(self, a: Tensor, b: Tensor) -> Tensor:  # type: ignore[override]
        try:
            return super().__call__(a, b)
        except ValueError as error:
            if "broadcast" in str(error) or "operands could not" in str(error):
                raise broadcast_error(f"'{self.symbol}' ({self.name})", a, b) from None
            raise

    def _shapes(self, a: np.ndarray, b: np.ndarray) -> None:
        self.a_shape, self.b_shape = a.shape, b.shape


class Add(_Binary):
    symbol = "+"
    ufunc, saves_no_arrays, saves_inputs, keeps_output = (np.add, 2), True, False, False

    def forward(self, a, b):
        self._shapes(a, b)
        return a + b

    def backward(self, grad):
        return unbroadcast(grad, self.a_shape), unbroadcast(grad, self.b_shape)


class Sub(_Binary):
    symbol = "-"
    ufunc, saves_no_arrays, saves_inputs, keeps_output = (np.subtract, 2), True, False, False

    def forward(self, a, b):
        self._shapes(a, b)
        return a - b

    def backward(self, grad):
        gb = -unbroadcast(grad, self.b_shape) if self.needs_input_grad[1] else None
        return unbroadcast(grad, self.a_shape), gb


class Mul(_Binary):
    symbol = "*"
    ufunc = (np.multiply, 2)

    def forward(self, a, b):
        self.a, self.b = a, b
        return a * b

    def backward(self, grad):
        a, b = self.a, self.b
        ga = unbroadcast(grad * b, a.shape) if self.needs_input_grad[0] else None
        gb = unbroadcast(grad * a, b.shape) if self.needs_input_grad[1] else None
        return ga, gb


class Div(_Binary):
    symbol = "/"
    ufunc = (np.true_divide, 2)

    def forward(self, a, b):
        self.a, self.b = a, b
        return a / b

    def backward(self, grad):
        a, b = self.a, self.b
        ga = unbroadcast(grad / b, a.shape) if self.needs_input_grad[0] else None
        gb = unbroadcast(-grad * a / (b * b), b.shape) if self.needs_input_grad[1] else None
        return ga, gb


class Pow(_Binary):
    symbol = "**"

    def forward(self, a, b):
        self.a, self.b = a, b
        self.out = a ** b
        return self.out

    def backward(self, grad):
        a, b = self.a, self.b
        ga = unbroadcast(grad * b * a ** (b - 1), a.shape) if self.needs_input_grad[0] else None
        gb = None
        if self.needs_input_grad[1]:
            xp = self.xp
            with errstate(xp, divide="ignore", invalid="ignore"):
                log_a = xp.where(a > 0, xp.log(xp.where(a > 0, a, 1)), 0)
            gb = unbroadcast(grad * self.out * log_a, b.shape)
        return ga, gb


class Neg(Function):
    output_nbytes = elementwise_nbytes
    ufunc, saves_no_arrays, saves_inputs, keeps_output = (np.negative, 1), True, False, False

    def forward(self, a):
        return -a

    def backward(self, grad):
        return (-grad,)


class MatMul(Function):
    """``a @ b`` for 1-d, 2-d and batched operands, as ``numpy.matmul``."""

    keeps_output = False  # saves its inputs only

    def __call__(self, a: Tensor, b: Tensor) -> Tensor:  # type: ignore[override]
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {a.shape} and {b.shape}")
        k_a, k_b = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
        if k_a != k_b:
            raise ValueError(f"matmul: shapes {a.shape} ({a.dtype}) and {b.shape} ({b.dtype}) are not aligned: "
                             f"{k_a} (last dim of the left) != {k_b} (first matrix dim of the right)")
        try:
            return super().__call__(a, b)
        except ValueError:
            raise ValueError(f"matmul: batch dimensions of {a.shape} and {b.shape} cannot be broadcast") from None

    def forward(self, a, b):
        self.a, self.b = a, b
        return a @ b

    def output_nbytes(self, a, b):
        """(..., n, k) @ (..., k, m) -> (broadcast batch..., n, m); a 1-d operand has its matrix dim dropped."""
        batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
        rows = (a.shape[-2],) if a.ndim > 1 else ()
        columns = (b.shape[-1],) if b.ndim > 1 else ()
        return shape_nbytes(batch + rows + columns, result_dtype(a, b))

    def backward(self, grad):
        a, b = self.a, self.b
        if a.ndim == 2 and b.ndim == 2:
            return (grad @ b.T if self.needs_input_grad[0] else None,
                    a.T @ grad if self.needs_input_grad[1] else None)
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g = grad  # restore the matrix dims numpy.matmul dropped for 1-d operands (both, for 1-d @ 1-d)
        if b.ndim == 1:
            g = g[..., None]
        if a.ndim == 1:
            g = g[..., None, :]
        ga = gb = None
        if self.needs_input_grad[0]:
            ga = g @ b2.swapaxes(-1, -2)
            ga = unbroadcast(ga, a2.shape).reshape(a.shape) if ga.shape != a.shape else ga
        if self.needs_input_grad[1]:
            gb = a2.swapaxes(-1, -2) @ g
            gb = unbroadcast(gb, b2.shape).reshape(b.shape) if gb.shape != b.shape else gb
        return ga, gb


def add(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    return Add()(a, b)


def sub(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    return Sub()(a, b)


def mul(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    return Mul()(a, b)


def div(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    if a._data.dtype.kind != "f" and b._data.dtype.kind != "f":  # true division of integers: default float dtype
        a, b = a.astype(_config.DEFAULT_DTYPE), b.astype(_config.DEFAULT_DTYPE)
    return Div()(a, b)


def pow(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    return Pow()(a, b)


def neg(a: Tensor) -> Tensor:
    return Neg()(a)


def matmul(a: Any, b: Any) -> Tensor:
    a, b = _pair(a, b)
    return MatMul()(a, b)


def _pair(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    # NOTE: an integer tensor meeting a Python float computes in the default float dtype (as PyTorch), not float64.
    if isinstance(a, Tensor):
        if isinstance(b, float) and a._data.dtype.kind != "f":
            a = a.astype(_config.DEFAULT_DTYPE)
        return a, as_tensor(b, a)
    b = as_tensor(b)
    if isinstance(a, float) and b._data.dtype.kind != "f":
        b = b.astype(_config.DEFAULT_DTYPE)
    return as_tensor(a, b), b
