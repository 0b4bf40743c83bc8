"""Stateless layer and loss functions with the names and arguments of ``torch.nn.functional``."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine import hooks as _hooks
from engine import ops as _ops
from engine.backend import common_device, cuda_backend as _cuda, to_device
from engine.ops import loss as _loss
from engine.ops.conv import Conv2d
from engine.ops.dropout import Dropout
from engine.ops.linear import linear
from engine.ops.normalization import BatchNorm
from engine.ops.pool import AvgPool2d, MaxPool2d
from engine.tensor import Tensor

__all__ = ["avg_pool2d", "batch_norm", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout",
           "gelu", "leaky_relu", "linear", "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "relu", "sigmoid",
           "softmax", "tanh"]


def _tensor(value: Any, what: str, like: Tensor | None = None) -> Tensor:
    """``value`` as a Tensor; plain arrays and lists go to the device of ``like`` (a GPU input's targets)."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, list, tuple, int, float)):
        return Tensor(value, device=None if like is None or type(like._data) is np.ndarray else like.device)
    raise TypeError(f"{what} must be a Tensor or array, got {type(value).__name__}")


def _array(value: Any, like: Tensor | None = None, fn: str = "") -> Any:
    """The array of ``value``: a Tensor's own (which must be on the device of ``like``), or a plain array/list
    put on the device of ``like``."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        if like is not None and _cuda.in_use:
            common_device(fn, (value.device, like.device), _hooks.module_stack[-1])
        return value._data
    array = np.asarray(value)
    if like is not None and type(like._data) is not np.ndarray:
        return to_device(array, like.device)
    return array


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
        raise NotImplementedError(f"gelu: only approximate='none' (the exact erf form) is implemented, "
                                  f"got {approximate!r}")
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
    labels = _array(target, input, fn)
    classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    expected = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if labels.dtype.kind not in "iu":
        raise TypeError(f"{fn}: target must hold integer class labels (int64/int32), got dtype {labels.dtype} with "
                        f"shape {labels.shape}; cast labels with .astype('int64')")
    if labels.shape != expected:
        raise ValueError(f"{fn}: target of shape {labels.shape} does not match input of shape {input.shape}; "
                         f"expected target shape {expected} (input is (N, C, d1, ...) with C={classes} classes)")
    w = _array(weight, input, fn)
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
    target_array = _array(target, input, "cross_entropy")
    if target_array.dtype.kind == "f" and target_array.shape == input.shape:
        w = _array(weight, input, "cross_entropy")
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
    input = _tensor(input, "mse_loss input")
    target = _tensor(target, "mse_loss target", input)
    try:
        np.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise ValueError(f"mse_loss: input {input.shape} and target {target.shape} cannot be broadcast") from None
    return _loss.MSELoss(reduction)(input, target)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Any = None, reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """Sigmoid + binary cross-entropy in one stable op; ``pos_weight`` weighs positives per class (last dim)."""
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    input = _tensor(input, "input")
    target = _tensor(target, "target", input)
    if input.shape != target.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target shape {target.shape} must equal input shape "
                         f"{input.shape}")
    if target.dtype != input.dtype:
        target = _ops.cast(target, input.dtype)
    fn = "binary_cross_entropy_with_logits"
    w, pw = _array(weight, input, fn), _array(pos_weight, input, fn)
    for name, arr in (("weight", w), ("pos_weight", pw)):
        if arr is not None:
            try:
                np.broadcast_shapes(arr.shape, input.shape)
            except ValueError:
                raise ValueError(f"binary_cross_entropy_with_logits: {name} of shape {arr.shape} cannot broadcast "
                                 f"to input shape {input.shape}") from None
    cast = lambda a: None if a is None else a.astype(input.dtype, copy=False)  # noqa: E731
    return _loss.BCEWithLogits(cast(w), cast(pw), reduction)(input, target)


# --- convolution, pooling, normalization, dropout --------------------------------------------------

def _pair(value: Any, name: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or any(not isinstance(v, (int, np.integer)) for v in pair):
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return int(pair[0]), int(pair[1])


def _padding(padding: Any, kernel: tuple[int, int], stride: tuple[int, int], fn: str) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from an int, a pair, or 'valid' / 'same' (stride 1, as PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding != "same":
            raise ValueError(f"{fn}: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        if stride != (1, 1):
            raise ValueError(f"{fn}: padding='same' needs stride 1, got stride {stride}")
        (th, tw) = (kernel[0] - 1, kernel[1] - 1)
        return th // 2, th - th // 2, tw // 2, tw - tw // 2
    ph, pw = _pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise ValueError(f"{fn}: padding must be non-negative, got {padding!r}")
    return ph, ph, pw, pw


def _check_image(fn: str, input: Tensor, kernel: tuple[int, int], padding: tuple[int, int, int, int]) -> None:
    if input.ndim != 4:
        raise ValueError(f"{fn}: expected a 4-d input (N, C, H, W), got shape {input.shape}"
                         + (" — add a batch dimension with x.reshape(1, *x.shape)" if input.ndim == 3 else ""))
    height, width = input.shape[2] + padding[0] + padding[1], input.shape[3] + padding[2] + padding[3]
    if height < kernel[0] or width < kernel[1]:
        raise ValueError(f"{fn}: kernel {kernel} is larger than the (padded) input {height}x{width} of input shape "
                         f"{input.shape}")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-d cross-correlation of input (N, C, H, W) with weight (O, C, kh, kw), as ``torch.nn.functional.conv2d``."""
    if _pair(dilation, "dilation") != (1, 1) or groups != 1:
        raise NotImplementedError(f"conv2d: only dilation=1 and groups=1 are implemented, got dilation={dilation}, "
                                  f"groups={groups}")
    if weight.ndim != 4:
        raise ValueError(f"conv2d: weight must be 4-d (out_channels, in_channels, kh, kw), got shape {weight.shape}")
    kernel, stride = weight.shape[2:], _pair(stride, "stride")
    pads = _padding(padding, kernel, stride, "conv2d")
    _check_image("conv2d", input, kernel, pads)
    if input.shape[1] != weight.shape[1]:
        raise ValueError(f"conv2d: input of shape {input.shape} has {input.shape[1]} channels but weight of shape "
                         f"{weight.shape} expects {weight.shape[1]} (input (N, {weight.shape[1]}, H, W))")
    if min(stride) < 1:
        raise ValueError(f"conv2d: stride must be positive, got {stride}")
    if bias is None:
        return Conv2d(stride, pads)(input, weight)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"conv2d: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    return Conv2d(stride, pads)(input, weight, bias)


def _pool(op: type, fn: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool) -> Tensor:
    if ceil_mode:
        raise NotImplementedError(f"{fn}: ceil_mode=True is not implemented")
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _pair(stride, "stride")
    pads = _padding(padding, kernel, stride, fn)
    if pads[0] * 2 > kernel[0] or pads[2] * 2 > kernel[1]:
        raise ValueError(f"{fn}: padding {padding} must be at most half the kernel size {kernel}")
    _check_image(fn, input, kernel, pads)
    return op(kernel, stride, pads)(input)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    if _pair(dilation, "dilation") != (1, 1) or return_indices:
        raise NotImplementedError("max_pool2d: dilation and return_indices are not implemented")
    return _pool(MaxPool2d, "max_pool2d", input, kernel_size, stride, padding, ceil_mode)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    if not count_include_pad or divisor_override is not None:
        raise NotImplementedError("avg_pool2d: only count_include_pad=True without divisor_override is implemented")
    return _pool(AvgPool2d, "avg_pool2d", input, kernel_size, stride, padding, ceil_mode)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Inverted dropout (identity when not training); the mask comes from ``engine.random``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    return Dropout(p)(input)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization over channel dim 1 of (N, C, *); updates the running statistics in place when training."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input (N, C) or (N, C, ...), got shape {input.shape}")
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (channels,):
            raise ValueError(f"batch_norm: {name} must have shape ({channels},) for input of shape {input.shape}, "
                             f"got {t.shape}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: pass both running_mean and running_var, or neither")
    if not training and running_mean is None:
        raise ValueError("batch_norm: evaluation (training=False) needs running_mean and running_var")
    if training and input.size // channels <= 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input shape "
                         f"{input.shape}")
    if (weight is None) != (bias is None):
        raise ValueError("batch_norm: pass both weight and bias, or neither")
    op = BatchNorm(_array(running_mean, input, "batch_norm"), _array(running_var, input, "batch_norm"), training,
                   momentum, eps)
    return op(input) if weight is None else op(input, weight, bias)
