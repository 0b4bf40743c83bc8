"""Parameter: a leaf Tensor that a Module learns, registered with the allocator as a "parameter"."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine import config as _config
from engine import memory as _memory
from engine.tensor import Tensor


class Parameter(Tensor):
    """A tensor that ``Module.__setattr__`` registers; requires a gradient unless told otherwise.

    A NumPy array or Tensor handed in is used without a copy (as ``torch.nn.Parameter`` shares storage).
    """

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:  # noqa: D107 - Tensor's fields
        array = data._data if isinstance(data, Tensor) else data
        if not isinstance(array, np.ndarray) and not hasattr(array, "__cuda_array_interface__"):
            array = np.asarray(array)
            if array.dtype == np.float64:
                array = array.astype(_config.DEFAULT_DTYPE)
        if requires_grad and array.dtype.kind != "f":
            raise TypeError(f"a Parameter that requires grad must be floating point, got dtype {array.dtype} "
                            f"(shape {array.shape})")
        self._mem_key = _memory.register(array, "parameter", "init")
        self._data, self._ctx, self.grad, self.name = array, None, None, None
        self.requires_grad = bool(requires_grad)

    def _replace(self, array: Any) -> None:
        """Point this parameter at ``array`` (a cast or moved copy of its values), re-registering the buffer."""
        key = _memory.register(array, "parameter", "cast")
        _memory.release(self._mem_key)
        self._data, self._mem_key = array, key

    def __deepcopy__(self, memo: dict[int, Any]) -> Parameter:
        """A new parameter with copied values (and gradient), registered with the allocator like any other."""
        copied = Parameter(self._data.copy(), self.requires_grad)
        if self.grad is not None:
            copied.grad = Tensor._wrap_array(self.grad._data.copy(), "gradient", "grad")
        memo[id(self)] = copied
        return copied

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def buffer(array: Any) -> Tensor:
    """A non-learned tensor of model state (e.g. BatchNorm running statistics), counted as a parameter."""
    return Tensor._wrap_array(array, "parameter", "buffer")
