"""Activation layers: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax."""
from __future__ import annotations

from engine import ops as _ops
from engine.nn.module import Module
from engine.tensor import Tensor


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return _ops.relu(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, input: Tensor) -> Tensor:
        return _ops.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return _ops.sigmoid(input)


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return _ops.tanh(input)


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate != "none":
            raise NotImplementedError(f"GELU: only approximate='none' is implemented, got {approximate!r}")

    def forward(self, input: Tensor) -> Tensor:
        return _ops.gelu(input)


class Softmax(Module):
    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return _ops.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input: Tensor) -> Tensor:
        return _ops.log_softmax(input, self.dim)
