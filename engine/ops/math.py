"""Elementwise math: exp, log, sqrt, abs, clip, and dtype casts."""
from __future__ import annotations

from typing import Any

from engine.op import Function
from engine.ops._util import elementwise_nbytes, errstate, shape_nbytes
from engine.tensor import Tensor, _as_dtype


class Exp(Function):
    output_nbytes = elementwise_nbytes
    saves_inputs = False  # backward reads its output

    def forward(self, x):
        self.out = self.xp.exp(x)
        return self.out

    def backward(self, grad):
        return (grad * self.out,)


class Log(Function):
    output_nbytes = elementwise_nbytes

    def forward(self, x):
        self.x = x
        with errstate(self.xp, divide="ignore", invalid="ignore"):
            return self.xp.log(x)

    def backward(self, grad):
        return (grad / self.x,)


class Sqrt(Function):
    output_nbytes = elementwise_nbytes
    saves_inputs = False  # backward reads its output

    def forward(self, x):
        with errstate(self.xp, invalid="ignore"):
            self.out = self.xp.sqrt(x)
        return self.out

    def backward(self, grad):
        with errstate(self.xp, divide="ignore"):
            return (grad / (2 * self.out),)


class Abs(Function):
    output_nbytes = elementwise_nbytes

    def forward(self, x):
        self.sign = self.xp.sign(x)
        return self.xp.abs(x)

    def backward(self, grad):
        return (grad * self.sign,)


class Clip(Function):
    """Clamp into [low, high]; the gradient passes where the input was inside the bounds (inclusive)."""

    output_nbytes = elementwise_nbytes

    def __init__(self, low: Any, high: Any) -> None:
        if low is None and high is None:
            raise ValueError("clip needs at least one of min and max")
        self.low, self.high = low, high

    def forward(self, x):
        xp = self.xp
        self.inside = xp.ones(x.shape, dtype=bool)
        if self.low is not None:
            self.inside &= x >= self.low
        if self.high is not None:
            self.inside &= x <= self.high
        return xp.clip(x, self.low, self.high)

    def backward(self, grad):
        return (grad * self.inside,)


class Cast(Function):
    def __init__(self, dtype: Any) -> None:
        self.dtype = _as_dtype(dtype)

    def forward(self, x):
        self.source = x.dtype
        return x.astype(self.dtype)

    def output_nbytes(self, x):
        return shape_nbytes(x.shape, self.dtype)

    def backward(self, grad):
        return (grad.astype(self.source),)


def exp(x: Tensor) -> Tensor:
    return Exp()(x)


def log(x: Tensor) -> Tensor:
    return Log()(x)


def sqrt(x: Tensor) -> Tensor:
    return Sqrt()(x)


def abs(x: Tensor) -> Tensor:
    return Abs()(x)


def clip(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    return Clip(min, max)(x)


def cast(x: Tensor, dtype: Any) -> Tensor:
    result = Cast(dtype)(x)
    if result.requires_grad and result.dtype.kind != "f":
        result.requires_grad, result._ctx = False, None
    return result
