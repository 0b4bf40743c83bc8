"""Linear (fully connected) layer and Identity."""
from __future__ import annotations

import numpy as np

from engine import config as _config
from engine.nn import init
from engine.nn.module import Module
from engine.nn.parameter import Parameter
from engine.ops.linear import linear
from engine.tensor import Tensor


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features), initialised as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: str | None = None) -> None:
        super().__init__()
        dtype = dtype or _config.DEFAULT_DTYPE
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = Parameter(np.empty((self.out_features, self.in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(self.out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            init.default_bias_(self.bias, self.in_features)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input
