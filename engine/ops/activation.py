"""Activations: tanh, sigmoid, relu, leaky_relu and the exact (erf-based) gelu."""
from __future__ import annotations

import math

import numpy as np

from engine.backend import is_device_array
from engine.op import Function
from engine.ops._util import elementwise_nbytes
from engine.tensor import Tensor

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function elementwise, to float precision (Abramowitz–Stegun 7.1.26 is too coarse)."""
    if type(x) is not np.ndarray and is_device_array(x):  # a CuPy array: CuPy's own erf kernel
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(x).astype(x.dtype, copy=False)
    try:
        from scipy.special import erf as scipy_erf  # scipy ships with scikit-learn
        return scipy_erf(x).astype(x.dtype, copy=False)
    except ImportError:  # pragma: no cover - scipy is a dependency of scikit-learn
        return _erf(x).astype(x.dtype)


class Tanh(Function):
    output_nbytes = elementwise_nbytes
    saves_inputs = False  # backward reads its output

    def forward(self, x):
        self.out = self.xp.tanh(x)
        return self.out

    def backward(self, grad):
        return (grad * (1 - self.out * self.out),)


class Sigmoid(Function):
    output_nbytes = elementwise_nbytes
    saves_inputs = False  # backward reads its output

    def forward(self, x):
        # exp(-|x|) never overflows: sigmoid(x) = 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise.
        xp = self.xp
        z = xp.exp(-xp.abs(x))
        self.out = xp.where(x >= 0, 1 / (1 + z), z / (1 + z)).astype(x.dtype, copy=False)
        return self.out

    def backward(self, grad):
        return (grad * self.out * (1 - self.out),)


class ReLU(Function):
    output_nbytes = elementwise_nbytes
    saves_inputs = False  # backward reads its output

    def forward(self, x):
        self.out = self.xp.maximum(x, 0)
        return self.out

    def forward_in_place(self, x):
        """``forward`` written into ``x`` (a dead input the graph's in-place pass hands over): the same bits."""
        self.out = self.xp.maximum(x, 0, out=x)
        return self.out

    def backward(self, grad):
        return (grad * (self.out > 0),)


class LeakyReLU(Function):
    output_nbytes = elementwise_nbytes

    def __init__(self, negative_slope: float = 0.01) -> None:
        self.negative_slope = negative_slope

    def forward(self, x):
        self.scale = self.xp.where(x > 0, 1, self.negative_slope).astype(x.dtype)
        return x * self.scale

    def backward(self, grad):
        return (grad * self.scale,)


class GELU(Function):
    """x·Φ(x) with the exact normal CDF, PyTorch's default ``approximate='none'``."""

    output_nbytes = elementwise_nbytes

    def forward(self, x):
        self.x = x
        self.cdf = 0.5 * (1 + erf(x * _SQRT_HALF))
        return x * self.cdf

    def backward(self, grad):
        x = self.x
        pdf = self.xp.exp(-0.5 * x * x) * _INV_SQRT_2PI
        return (grad * (self.cdf + x * pdf),)


def tanh(x: Tensor) -> Tensor:
    return Tanh()(x)


def sigmoid(x: Tensor) -> Tensor:
    return Sigmoid()(x)


def relu(x: Tensor) -> Tensor:
    return ReLU()(x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return LeakyReLU(negative_slope)(x)


def gelu(x: Tensor) -> Tensor:
    return GELU()(x)
