"""Linear (fully connected) layer and Identity."""
from __future__ import annotations

import numpy as np

from engine import config as _config
from engine.nn import init
from engine.nn.module import Module
from engine.nn.parameter import Parameter
from engine.ops.linear import linear
from engine.tensor import Tensor


def add_weight_and_bias(module: Module, weight_shape: tuple[int, ...], bias: bool, dtype: str | None) -> None:
    """Give ``module`` a ``weight`` of ``weight_shape`` and a ``bias`` (or None) of (weight_shape[0],)."""
    dtype = dtype or _config.DEFAULT_DTYPE
    module.weight = Parameter(np.empty(weight_shape, dtype=dtype))
    if bias:
        module.bias = Parameter(np.empty(weight_shape[0], dtype=dtype))
    else:
        module.register_parameter("bias", None)
    reset_weight_and_bias(module)


def reset_weight_and_bias(module: Module) -> None:
    """PyTorch's Linear/Conv init: weight kaiming_uniform(a=√5) = U(±1/√fan_in), bias U(±1/√fan_in)."""
    init.kaiming_uniform_(module.weight, a=5 ** 0.5)
    if module.bias is not None:
        init.default_bias_(module.bias, init.calculate_fan_in_and_fan_out(module.weight)[0])


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features), initialised as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: str | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        add_weight_and_bias(self, (self.out_features, self.in_features), bias, dtype)

    def reset_parameters(self) -> None:
        reset_weight_and_bias(self)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input
