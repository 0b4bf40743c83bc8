"""Numerically stable softmax and log-softmax along one axis."""
from __future__ import annotations

from engine.op import Function
from engine.ops._util import elementwise_nbytes, single_axis
from engine.tensor import Tensor


class Softmax(Function):
    output_nbytes = elementwise_nbytes

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x):
        shifted = x - x.max(axis=self.axis, keepdims=True)
        e = self.xp.exp(shifted)
        self.out = e / e.sum(axis=self.axis, keepdims=True)
        return self.out

    def backward(self, grad):
        y = self.out
        return (y * (grad - (grad * y).sum(axis=self.axis, keepdims=True)),)


class LogSoftmax(Function):
    output_nbytes = elementwise_nbytes

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x):
        shifted = x - x.max(axis=self.axis, keepdims=True)
        xp = self.xp
        self.out = shifted - xp.log(xp.exp(shifted).sum(axis=self.axis, keepdims=True))
        return self.out

    def backward(self, grad):
        return (grad - self.xp.exp(self.out) * grad.sum(axis=self.axis, keepdims=True),)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return Softmax(single_axis(axis, x.ndim, x.shape, "softmax"))(x)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    return LogSoftmax(single_axis(axis, x.ndim, x.shape, "log_softmax"))(x)
