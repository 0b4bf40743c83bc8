"""Torch tensors seen as the engine's parameters and layer outputs: NumPy arrays, without a copy where there can be."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

_NUMPY_DTYPES = frozenset({torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                           torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128})


def to_numpy(tensor: Any) -> np.ndarray:
    """A view of a CPU tensor's memory (an in-place update shows in it); a copy of any other (CUDA, sparse,
    bfloat16 as float32)."""
    try:  # NOTE: the common case, a CPU tensor of a NumPy dtype: one call (3-4x cheaper than the checks below)
        return (tensor.detach() if tensor.requires_grad else tensor).numpy()
    except (RuntimeError, TypeError):
        pass
    detached = tensor.detach()
    if detached.layout is not torch.strided:
        detached = detached.to_dense()
    if detached.device.type != "cpu":
        detached = detached.cpu()
    if detached.dtype not in _NUMPY_DTYPES:
        detached = detached.float()
    return detached.resolve_conj().resolve_neg().numpy()


class TorchArray:
    """A parameter as ``ParameterTracker`` and ``Watch`` read one: ``shape``, ``numpy()`` and ``grad`` (None or a
    ``TorchArray``). A CPU parameter's NumPy view is kept while its memory stays where it was (optimizers update in
    place; ``param.data = …`` moves it): the same array object each step, as the tracker's layout expects."""

    __slots__ = ("tensor", "_view", "_address")

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor
        self._view: np.ndarray | None = None
        self._address = -1

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def grad(self) -> TorchArray | None:
        grad = self.tensor.grad
        return None if grad is None else TorchArray(grad)

    def numpy(self) -> np.ndarray:
        tensor = self.tensor
        address = tensor.data_ptr()
        view = self._view
        if view is not None and address == self._address and view.shape == tensor.shape:
            return view
        view = to_numpy(tensor)
        if view.ctypes.data == address:
            self._view, self._address = view, address  # NOTE: a view, not a copy: it follows in-place updates
        return view
