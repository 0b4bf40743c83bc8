"""Validation of what users pass to the writer, on the calling thread: ValueError naming the tag, copies of arrays."""
from __future__ import annotations

from typing import Any

import numpy as np

from instrumentation.summary.wire import INT64_MAX, INT64_MIN

_NUMERIC_KINDS = "biuf"


def check_tag(tag: Any) -> str:
    if tag.__class__ is not str and not isinstance(tag, str):
        raise ValueError(f"summary tag must be a str, got {type(tag).__name__} {tag!r}")
    return tag


def to_numpy(values: Any) -> np.ndarray:
    """numpy arrays, lists, torch tensors (any device/dtype) and engine Tensors (duck-typed by `.numpy()`)."""
    if isinstance(values, np.ndarray):
        return values
    if type(values).__module__.partition(".")[0] == "torch":  # off the autograd graph and the device first
        values = values.detach().cpu()
        if str(values.dtype) == "torch.bfloat16":  # numpy has no bfloat16
            values = values.float()
    if hasattr(values, "numpy") and not isinstance(values, np.generic):
        values = values.numpy()
    return np.asarray(values)


def to_float(tag: str, value: Any) -> float:
    """A Python float; NaN and ±Inf pass unchanged. Strings, non-numeric and multi-element values raise."""
    kind = value.__class__
    if kind is float:
        return value
    if kind is int or kind is bool:
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"scalar for tag {tag!r} does not fit a float: {value!r}") from None
    if isinstance(value, (str, bytes, bytearray)) or value is None:
        raise ValueError(f"scalar for tag {tag!r} must be a number, got {type(value).__name__} {value!r}")
    try:
        array = to_numpy(value)
    except Exception as error:
        raise ValueError(f"scalar for tag {tag!r} is not numeric: {type(value).__name__} ({error})") from None
    if array.dtype.kind not in _NUMERIC_KINDS or array.size != 1:
        raise ValueError(f"scalar for tag {tag!r} must be one real number, got dtype {array.dtype} "
                         f"shape {array.shape}")
    return float(array.reshape(()))


def histogram_values(tag: str, values: Any) -> np.ndarray:
    """A private copy of the values (the caller may change its array right after the call), real and non-empty."""
    if isinstance(values, (str, bytes, bytearray)) or values is None:
        raise ValueError(f"histogram values for tag {tag!r} must be numeric, got {type(values).__name__}")
    try:
        source = to_numpy(values)
    except Exception as error:
        raise ValueError(f"histogram values for tag {tag!r} are not numeric: {type(values).__name__} ({error})") \
            from None
    if source.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"histogram values for tag {tag!r} must be real numbers, got dtype {source.dtype}")
    if source.size == 0:
        raise ValueError(f"histogram for tag {tag!r} is empty (no values)")
    return np.array(source, copy=True, order="C")


def to_step(global_step: Any) -> int:
    """An int within int64 (an Event's step, as protobuf requires); None: 0."""
    if global_step is None:
        return 0
    step = global_step
    if step.__class__ is not int:
        try:
            step = int(global_step)
        except (TypeError, ValueError):
            raise ValueError(f"global_step must be an integer, got {type(global_step).__name__} {global_step!r}") \
                from None
    if not INT64_MIN <= step <= INT64_MAX:
        raise ValueError(f"global_step {step} does not fit an int64")
    return step
