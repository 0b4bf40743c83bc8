"""Batch normalization as one fused op: statistics, normalization and affine map, closed-form backward."""
from __future__ import annotations

import numpy as np

from engine.op import Function
from engine.ops._util import result_dtype, shape_nbytes


class BatchNorm(Function):
    """Normalize x (N, C, *) per channel C with batch statistics (training) or running statistics (eval).

    In training the running statistics (arrays owned by the caller) are updated in place with the unbiased
    batch variance: ``running = (1 - momentum)·running + momentum·batch``, as PyTorch.
    """

    def __init__(self, running_mean: np.ndarray | None, running_var: np.ndarray | None, training: bool,
                 momentum: float, eps: float) -> None:
        self.running_mean, self.running_var = running_mean, running_var
        self.training, self.momentum, self.eps = training, momentum, eps

    def forward(self, x, weight=None, bias=None):
        channels = x.shape[1]
        axes = (0,) + tuple(range(2, x.ndim))
        bshape = (1, channels) + (1,) * (x.ndim - 2)
        count = x.size // channels
        self.axes, self.bshape, self.count, self.affine = axes, bshape, count, weight is not None
        if self.training:
            mean = x.mean(axis=axes)
            centered = x - mean.reshape(bshape)
            letters = "ab" + "cdefghij"[:x.ndim - 2]
            var = self.xp.einsum(f"{letters},{letters}->b", centered, centered) / x.dtype.type(count)
            if self.running_mean is not None:
                m = self.momentum
                self.running_mean *= 1 - m
                self.running_mean += m * mean.astype(self.running_mean.dtype, copy=False)
                self.running_var *= 1 - m
                self.running_var += (m * count / max(count - 1, 1)) * var.astype(self.running_var.dtype, copy=False)
        else:
            mean, var = self.running_mean, self.running_var
            centered = x - mean.astype(x.dtype, copy=False).reshape(bshape)
        invstd = 1.0 / self.xp.sqrt(var.astype(x.dtype, copy=False) + x.dtype.type(self.eps))
        invstd = invstd.astype(x.dtype, copy=False)
        scale = invstd if weight is None else invstd * weight
        if self.training:
            centered *= invstd.reshape(bshape)  # now x̂
            self.xhat = centered
            out = centered * (weight.reshape(bshape) if weight is not None else 1)
        else:
            out = centered * scale.reshape(bshape)
            self.centered = centered if weight is not None else None
            self.invstd = invstd
        if bias is not None:
            out += bias.reshape(bshape)
        self.scale = scale
        return out

    def output_nbytes(self, x, weight=None, bias=None):
        return shape_nbytes(x.shape, result_dtype(x) if weight is None else result_dtype(x, weight))

    def backward(self, grad):
        axes, bshape = self.axes, self.bshape
        gb = grad.sum(axis=axes) if self.affine else None
        if self.training:
            xhat = self.xhat
            gxhat_sum = gb if gb is not None else grad.sum(axis=axes)
            gxhat_dot = (grad * xhat).sum(axis=axes)  # Σ g·x̂: also the weight gradient
            gw = gxhat_dot if self.affine else None
            gx = None
            if self.needs_input_grad[0]:
                inv = grad.dtype.type(1.0 / self.count)
                gx = grad - (gxhat_sum * inv).reshape(bshape)
                gx -= xhat * (gxhat_dot * inv).reshape(bshape)
                gx *= self.scale.reshape(bshape)
        else:
            gx = grad * self.scale.reshape(bshape) if self.needs_input_grad[0] else None
            gw = (grad * self.centered).sum(axis=axes) * self.invstd if self.affine else None
        return (gx,) if not self.affine else (gx, gw, gb)
