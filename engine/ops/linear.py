"""Fused affine map ``x @ weight.T + bias`` (one op instead of transpose, matmul and add)."""
from __future__ import annotations

from engine.op import Function
from engine.ops._util import result_dtype, shape_nbytes
from engine.tensor import Tensor


class Linear(Function):
    """``y = x @ w.T (+ b)`` for x of shape (..., in), w (out, in), b (out,)."""

    keeps_output = False  # saves its inputs only

    def forward(self, x, weight, bias=None):
        self.x, self.weight, self.has_bias = x, weight, bias is not None
        out = self.xp.matmul(x, weight.T)
        if bias is not None:
            out += bias
        return out

    def output_nbytes(self, x, weight, bias=None):
        return shape_nbytes(x.shape[:-1] + weight.shape[:1], result_dtype(x, weight))

    def backward(self, grad):
        x, weight = self.x, self.weight
        gx = self.xp.matmul(grad, weight) if self.needs_input_grad[0] else None
        g2 = grad.reshape(-1, grad.shape[-1])
        gw = self.xp.matmul(g2.T, x.reshape(-1, x.shape[-1])) if self.needs_input_grad[1] else None
        if not self.has_bias:
            return gx, gw
        gb = g2.sum(axis=0) if self.needs_input_grad[2] else None
        return gx, gw, gb


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input of shape {x.shape} does not fit weight of shape {weight.shape}: expected "
                         f"input (..., {weight.shape[1] if weight.ndim == 2 else 'in_features'}) and weight "
                         "(out_features, in_features)")
    if bias is None:
        return Linear()(x, weight)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias of shape {bias.shape} does not fit weight of shape {weight.shape}; expected "
                         f"({weight.shape[0]},)")
    return Linear()(x, weight, bias)
