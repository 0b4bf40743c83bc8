"""Shape ops: reshape, transpose, flatten, concat, stack, and indexing (basic and integer-array)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from engine.backend import is_device_array
from engine.op import Function
from engine.ops._util import as_tensor, result_dtype, single_axis
from engine.tensor import Tensor


class Reshape(Function):
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, x):
        self.in_shape = x.shape
        try:
            return x.reshape(self.shape)
        except ValueError:
            raise ValueError(f"cannot reshape a tensor of shape {x.shape} ({x.size} elements) into "
                             f"{self.shape}") from None

    def output_nbytes(self, x):
        return 0 if x.flags.c_contiguous else None  # a view; otherwise maybe a copy (checked once made)

    def backward(self, grad):
        return (grad.reshape(self.in_shape),)


class Transpose(Function):
    def __init__(self, axes: tuple[int, ...] | None) -> None:
        self.axes = axes

    def forward(self, x):
        if self.axes is not None and (len(self.axes) != x.ndim or any(not -x.ndim <= a < x.ndim for a in self.axes)
                                      or sorted(a % x.ndim for a in self.axes) != list(range(x.ndim))):
            raise ValueError(f"transpose axes {self.axes} are not a permutation of the {x.ndim} axes of {x.shape}")
        return x.transpose() if self.axes is None else x.transpose(self.axes)

    def output_nbytes(self, x):
        return 0  # a view

    def backward(self, grad):
        inverse = None if self.axes is None else tuple(np.argsort([a % grad.ndim for a in self.axes]))
        return (grad.transpose() if inverse is None else grad.transpose(inverse),)


class Concat(Function):
    def __init__(self, axis: int) -> None:
        self.axis = axis

    def forward(self, *xs):
        self.sizes = [x.shape[self.axis] for x in xs]
        return self.xp.concatenate(xs, axis=self.axis)

    def output_nbytes(self, *xs):
        return sum(x.size for x in xs) * result_dtype(*xs).itemsize

    def backward(self, grad):
        return tuple(self.xp.split(grad, np.cumsum(self.sizes)[:-1].tolist(), axis=self.axis))


class Stack(Function):
    def __init__(self, axis: int) -> None:
        self.axis = axis

    def forward(self, *xs):
        return self.xp.stack(xs, axis=self.axis)

    def output_nbytes(self, *xs):
        return sum(x.size for x in xs) * result_dtype(*xs).itemsize

    def backward(self, grad):
        return tuple(self.xp.moveaxis(grad, self.axis, 0))


class GetItem(Function):
    """``x[index]``; with integer-array indices the gradient is scatter-added (repeated indices add up)."""

    def __init__(self, index: Any) -> None:
        self.index = index
        parts = index if isinstance(index, tuple) else (index,)
        self.advanced = any(isinstance(p, (np.ndarray, list)) or is_device_array(p) for p in parts)

    def forward(self, x):
        self.shape, self.dtype = x.shape, x.dtype
        if self.advanced and self.xp is not np:  # host index arrays go to the data's device
            self.index = _on_device(self.index, self.xp)
        try:
            out = x[self.index]
        except IndexError as error:
            raise IndexError(f"index {_describe(self.index)} is invalid for a tensor of shape {x.shape}: "
                             f"{error}") from None
        return np.asarray(out) if isinstance(out, np.generic) else out

    def output_nbytes(self, x):
        """Basic indexing gives a view, or a 0-d copy when every axis gets an int; integer arrays: not known."""
        if self.advanced:
            return None
        parts = self.index if isinstance(self.index, tuple) else (self.index,)
        element = len(parts) == x.ndim and all(type(p) is not bool and isinstance(p, (int, np.integer)) for p in parts)
        return x.dtype.itemsize if element else 0

    def backward(self, grad):
        xp = self.xp
        full = xp.zeros(self.shape, dtype=grad.dtype)
        if self.advanced and xp is np:
            np.add.at(full, self.index, grad)
        elif self.advanced:
            import cupyx  # the CuPy branch only: np.add.at's counterpart
            cupyx.scatter_add(full, self.index, grad)
        else:
            full[self.index] = grad
        return (full,)


def _on_device(index: Any, xp: Any) -> Any:
    if isinstance(index, tuple):
        return tuple(_on_device(p, xp) for p in index)
    return xp.asarray(index) if type(index) is np.ndarray else index


def _describe(index: Any) -> str:
    parts = index if isinstance(index, tuple) else (index,)
    return "[" + ", ".join(f"array{p.shape}" if hasattr(p, "shape") else repr(p) for p in parts) + "]"


def _plain_index(index: Any) -> Any:
    if isinstance(index, tuple):
        return tuple(_plain_index(p) for p in index)
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, list):
        return np.asarray(index)
    return index


def reshape(x: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return Reshape(tuple(int(s) for s in shape))(x)


def transpose(x: Tensor, *axes: Any) -> Tensor:
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return Transpose(tuple(axes) if axes else None)(x)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    start = single_axis(start_dim, x.ndim, x.shape, "flatten start_dim")
    end = single_axis(end_dim, x.ndim, x.shape, "flatten end_dim")
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape {x.shape}")
    shape = x.shape[:start] + (-1,) + x.shape[end + 1:] if x.ndim else (1,)
    return reshape(x, shape)


def concat(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    tensors = [as_tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("concat needs at least one tensor")
    axis = single_axis(axis, tensors[0].ndim, tensors[0].shape, "concat")
    _check_same(tensors, "concat", skip_axis=axis)
    return Concat(axis)(*tensors)


def stack(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    tensors = [as_tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    _check_same(tensors, "stack", skip_axis=None)
    axis = single_axis(axis, tensors[0].ndim + 1, op=f"stack of {len(tensors)} tensors of shape {tensors[0].shape}")
    return Stack(axis)(*tensors)


def _check_same(tensors: list[Tensor], op: str, skip_axis: int | None) -> None:
    first = tensors[0].shape
    for t in tensors[1:]:
        a, b = list(first), list(t.shape)
        if skip_axis is not None and len(a) == len(b) and a:
            a.pop(skip_axis % len(a)), b.pop(skip_axis % len(b))
        if a != b:
            shapes = ", ".join(str(t.shape) for t in tensors)
            where = f" except along axis {skip_axis}" if skip_axis is not None else ""
            raise ValueError(f"{op}: all tensors need the same shape{where}, got {shapes}")


def getitem(x: Tensor, index: Any) -> Tensor:
    return GetItem(_plain_index(index))(x)
