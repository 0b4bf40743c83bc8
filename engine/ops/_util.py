"""Helpers shared by ops: operand coercion and reducing a broadcast gradient back to its input's shape."""
from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from engine import config as _config
from engine.backend import get_array_module
from engine.tensor import Tensor


def as_tensor(value: Any, like: Tensor | None = None) -> Tensor:
    """``value`` as a Tensor; Python numbers take the dtype of ``like`` (weak typing, as in PyTorch)."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float)) and like is not None:
        dtype = like._data.dtype
        if isinstance(value, float) and dtype.kind != "f":
            dtype = np.dtype(_config.DEFAULT_DTYPE)
        elif isinstance(value, int) and not isinstance(value, bool) and dtype.kind == "b":
            dtype = np.dtype("int64")
        if type(like._data) is np.ndarray:
            return Tensor._wrap_array(np.asarray(value, dtype=dtype), "input", "constant")
        return _device_scalar(value, dtype, like)
    if type(value) is np.ndarray and value.dtype.kind in "fiub":
        return Tensor._wrap_array(value, "input", "constant")  # ops never write to their inputs: no copy
    if isinstance(value, np.generic) and like is not None and type(like._data) is not np.ndarray:
        return _device_scalar(value, value.dtype, like)  # a NumPy scalar is a scalar on any device (as in PyTorch)
    return Tensor(value)


def _device_scalar(value: Any, dtype: np.dtype, like: Tensor) -> Tensor:
    """A 0-d constant on the GPU of ``like`` (a fill kernel, no host-to-device copy)."""
    with like._data.device:
        return Tensor._wrap_array(get_array_module(like._data).full((), value, dtype=dtype), "input", "constant")


def errstate(xp: Any, **kwargs: str) -> Any:
    """``np.errstate(**kwargs)`` for NumPy; nothing for CuPy (which never warns on floating-point errors)."""
    return np.errstate(**kwargs) if xp is np else contextlib.nullcontext()


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the axes along which an input of ``shape`` was broadcast."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, size in enumerate(shape)
                                      if size == 1 and grad.shape[lead + i] != 1)
    reduced = grad.sum(axis=axes)
    return reduced if reduced.shape == shape else reduced.reshape(shape)


def broadcast_error(op: str, a: Tensor, b: Tensor) -> ValueError:
    return ValueError(f"{op}: shapes {a.shape} ({a.dtype}) and {b.shape} ({b.dtype}) cannot be broadcast together")


def normalize_axis(axis: Any, ndim: int, shape: tuple[int, ...] | None = None, op: str = "") -> tuple[int, ...] | None:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes; None means all."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    result = [single_axis(a, ndim, shape, op) for a in axes]
    if len(set(result)) != len(result):
        raise ValueError(f"repeated axis in {axis}")
    return () if ndim == 0 else tuple(sorted(result))  # a 0-d tensor accepts axis 0/-1 (as PyTorch) and keeps its value


def single_axis(axis: Any, ndim: int, shape: tuple[int, ...] | None = None, op: str = "") -> int:
    """``axis`` as a non-negative int; a clear error naming the op and shape when it is out of range."""
    bound = max(ndim, 1)
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -bound <= axis < bound:
        where = f"{op}: " if op else ""
        of = f"of shape {shape}" if shape is not None else f"with {ndim} dimensions"
        raise ValueError(f"{where}axis {axis!r} is out of range for a tensor {of} (valid: {-bound} to {bound - 1})")
    return int(axis) % bound


# --- output sizes from shapes and dtypes (Function.output_nbytes), before an op computes anything -----------------

def elementwise_nbytes(op: Any, *arrays: Any) -> int:
    """``output_nbytes`` of an elementwise op: its inputs broadcast together, in their promoted dtype."""
    return shape_nbytes(broadcast_shape(*[a.shape for a in arrays]), result_dtype(*arrays))


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``np.broadcast_shapes`` with a fast path for equal shapes (the common case; ~0.1 µs instead of ~3)."""
    first = shapes[0]
    for shape in shapes[1:]:
        if shape != first:
            return np.broadcast_shapes(*shapes)
    return first


def result_dtype(*arrays: Any) -> np.dtype:
    """The dtype NumPy promotes ``arrays`` (numpy or cupy) to, with a fast path for one dtype."""
    first = arrays[0].dtype
    for array in arrays[1:]:
        if array.dtype != first:
            return np.result_type(*[a.dtype for a in arrays])
    return first


def shape_nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize
