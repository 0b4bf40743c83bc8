"""Conv2d layer: weight (out_channels, in_channels, kh, kw), initialised as in PyTorch."""
from __future__ import annotations

from typing import Any

from engine.nn import functional as F
from engine.nn.layers.linear import add_weight_and_bias, reset_weight_and_bias
from engine.nn.module import Module
from engine.tensor import Tensor


class Conv2d(Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 bias: bool = True, dtype: str | None = None) -> None:
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = F._pair(kernel_size, "kernel_size")
        self.stride = F._pair(stride, "stride")
        self.padding = padding if isinstance(padding, str) else F._pair(padding, "padding")
        add_weight_and_bias(self, (self.out_channels, self.in_channels) + self.kernel_size, bias, dtype)

    def reset_parameters(self) -> None:
        reset_weight_and_bias(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding)

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding not in ((0, 0), "valid"):
            text += f", padding={self.padding}"
        return text + ("" if self.bias is not None else ", bias=False")
