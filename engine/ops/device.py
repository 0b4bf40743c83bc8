"""Moving a tensor between devices: a copy that is part of the graph (the gradient goes back to the source device)."""
from __future__ import annotations

from typing import Any

from engine import backend as _backend
from engine.op import Function, is_grad_enabled
from engine.tensor import Tensor


class ToDevice(Function):
    """``x`` copied to ``device`` (host<->GPU or GPU<->GPU); backward copies the gradient back."""

    def __init__(self, device: _backend.Device) -> None:
        self.device = device

    def __call__(self, x: Tensor) -> Tensor:  # type: ignore[override]
        # NOTE: one input: no device check to make; xp stays that of the source (forward only copies)
        if is_grad_enabled() and x.requires_grad:
            return super().__call__(x)
        return Tensor._wrap_array(_backend.to_device(x._data, self.device), "input", "to")

    def forward(self, x):
        self.source = _backend.array_device(x)
        return _backend.to_device(x, self.device)

    def output_nbytes(self, x):
        return 0  # the copy lands on another device than the one the limit of ``x`` applies to

    def backward(self, grad):
        return (_backend.to_device(grad, self.source),)


def to_device(x: Tensor, device: Any) -> Tensor:
    return ToDevice(_backend.resolve(device))(x)
