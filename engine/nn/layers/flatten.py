"""Flatten layer: merge dims start_dim..end_dim (by default everything but the batch dim)."""
from __future__ import annotations

from engine import ops as _ops
from engine.nn.module import Module
from engine.tensor import Tensor


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return _ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
