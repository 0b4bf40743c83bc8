"""BatchNorm1d / BatchNorm2d: batch statistics in training, running statistics (buffers) in eval."""
from __future__ import annotations

import numpy as np

from engine import config as _config
from engine.nn import functional as F
from engine.nn.module import Module
from engine.nn.parameter import Parameter, buffer
from engine.tensor import Tensor


class _BatchNorm(Module):
    expected_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype: str | None = None) -> None:
        super().__init__()
        dtype = dtype or _config.DEFAULT_DTYPE
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.ones(self.num_features, dtype=dtype))
            self.bias = Parameter(np.zeros(self.num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", buffer(np.zeros(self.num_features, dtype=dtype)))
            self.register_buffer("running_var", buffer(np.ones(self.num_features, dtype=dtype)))
            self.register_buffer("num_batches_tracked", buffer(np.zeros((), dtype=np.int64)))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean._data[...] = 0
            self.running_var._data[...] = 1
            self.num_batches_tracked._data[...] = 0

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self.expected_dims or input.shape[1] != self.num_features:
            dims = " or ".join(f"{d}-d" for d in self.expected_dims)
            raise ValueError(f"{type(self).__name__}({self.num_features}) expects a {dims} input with "
                             f"{self.num_features} channels in dim 1, got shape {input.shape}")
        use_batch_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked._data += 1
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / int(self.num_batches_tracked._data)
        stats = (self.running_mean, self.running_var) if not self.training or self.track_running_stats else (None, None)
        return F.batch_norm(input, stats[0], stats[1], self.weight, self.bias, use_batch_stats, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) inputs."""

    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) inputs."""

    expected_dims = (4,)
