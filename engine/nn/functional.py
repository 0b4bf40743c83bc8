"""Stateless layer and loss functions with the names and arguments of ``torch.nn.functional``."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine import ops as _ops
from engine.ops import loss as _loss
from engine.ops.linear import linear
from engine.tensor import Tensor

__all__ = ["avg_pool2d", "batch_norm", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout",
           "gelu", "leaky_relu", "linear", "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "relu", "sigmoid",
           "softmax", "tanh"]


def _tensor(value: Any, what: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, list, tuple, int, float)):
        return Tensor(value)
    raise TypeError(f"{what} must be a Tensor or array, got {type(value).__name__}")


def _array(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    return value._data if isinstance(value, Tensor) else np.asarray(value)


def _check_reduction(fn: str, reduction: str) -> None:
    if reduction not in _loss.REDUCTIONS:
        raise ValueError(f"{fn}: reduction must be one of {_loss.REDUCTIONS}, got {reduction!r}")


# --- activations -----------------------------------------------------------------------------------

def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return _ops.relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return _ops.leaky_relu(input, negative_slope)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    if approximate != "none":
        raise NotImplementedError(f"gelu: only approximate='none' (the exact erf form) is implemented, got {approximate!r}")
    return _ops.gelu(input)


def sigmoid(input: Tensor) -> Tensor:
    return _ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return _ops.tanh(input)


def softmax(input: Tensor, dim: int = -1) -> Tensor:
    return _ops.softmax(input, dim)


def log_softmax(input: Tensor, dim: int = -1) -> Tensor:
    return _ops.log_softmax(input, dim)


# --- losses ----------------------------------------------------------------------------------------

def _class_target(fn: str, input: Tensor, target: Any, weight: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate (input, integer target, class weight) shapes for cross_entropy / nll_loss."""
    if input.ndim == 0:
        raise ValueError(f"{fn}: input must have a class dimension, got a 0-d tensor")
    labels = _array(target)
    classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    expected = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if labels.dtype.kind not in "iu":
        raise TypeError(f"{fn}: target must hold integer class labels (int64/int32), got dtype {labels.dtype} with "
                        f"shape {labels.shape}; cast labels with .astype('int64')")
    if labels.shape != expected:
        raise ValueError(f"{fn}: target of shape {labels.shape} does not match input of shape {input.shape}; "
                         f"expected target shape {expected} (input is (N, C, d1, ...) with C={classes} classes)")
    w = _array(weight)
    if w is not None and w.shape != (classes,):
        raise ValueError(f"{fn}: weight must have shape ({classes},), one entry per class, got {w.shape}")
    return labels, w


def cross_entropy(input: Tensor, target: Any, weight: Any = None, *, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between logits (N, C, ...) and integer labels (N, ...) or class probabilities (N, C, ...)."""
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    input = _tensor(input, "cross_entropy input")
    if input.dtype.kind != "f":
        raise TypeError(f"cross_entropy: input must be floating-point logits, got dtype {input.dtype}")
    target_array = _array(target)
    if target_array.dtype.kind == "f" and target_array.shape == input.shape:
        w = _array(weight)
        classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
        if w is not None and w.shape != (classes,):
            raise ValueError(f"cross_entropy: weight must have shape ({classes},), got {w.shape}")
        return _loss.SoftCrossEntropy(target_array, w, reduction, label_smoothing)(input)
    labels, w = _class_target("cross_entropy", input, target_array, weight)
    return _loss.CrossEntropy(labels, w, reduction, ignore_index, label_smoothing)(input)


def nll_loss(input: Tensor, target: Any, weight: Any = None, *, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities (N, C, ...) at integer labels (N, ...)."""
    _check_reduction("nll_loss", reduction)
    input = _tensor(input, "nll_loss input")
    labels, w = _class_target("nll_loss", input, target, weight)
    return _loss.NLLLoss(labels, w, reduction, ignore_index)(input)


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    _check_reduction("mse_loss", reduction)
    input, target = _tensor(input, "mse_loss input"), _tensor(target, "mse_loss target")
    try:
        np.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise ValueError(f"mse_loss: input {input.shape} and target {target.shape} cannot be broadcast") from None
    return _loss.MSELoss(reduction)(input, target)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Any = None, reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """Sigmoid + binary cross-entropy in one stable op; ``pos_weight`` weighs positives per class (last dim)."""
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    input, target = _tensor(input, "input"), _tensor(target, "target")
    if input.shape != target.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target shape {target.shape} must equal input shape "
                         f"{input.shape}")
    if target.dtype != input.dtype:
        target = _ops.cast(target, input.dtype)
    w, pw = _array(weight), _array(pos_weight)
    for name, arr in (("weight", w), ("pos_weight", pw)):
        if arr is not None:
            try:
                np.broadcast_shapes(arr.shape, input.shape)
            except ValueError:
                raise ValueError(f"binary_cross_entropy_with_logits: {name} of shape {arr.shape} cannot broadcast "
                                 f"to input shape {input.shape}") from None
    cast = lambda a: None if a is None else a.astype(input.dtype, copy=False)  # noqa: E731
    return _loss.BCEWithLogits(cast(w), cast(pw), reduction)(input, target)
