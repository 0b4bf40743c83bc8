"""NumPy references of the CUDA kernels in ``engine/backend/cuda/kernels.py``: same names, signatures and semantics.

Each function computes what its kernel computes, in the same operation order where that order decides the last bit
(Adam, the pools, col2im), so that the GPU tests can compare kernel and reference, and the CPU tests can compare the
reference with the engine's CPU ops and with torch.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

ACTIVATIONS = ("relu", "gelu")
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _float(name: str, array: np.ndarray) -> None:
    if array.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: float32 or float64 arrays only, got {array.dtype}")


def _checked_rows(logits: np.ndarray, labels: np.ndarray) -> None:
    _float("softmax_cross_entropy", logits)
    if logits.ndim != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(f"softmax_cross_entropy: logits must be (rows, classes) and labels (rows,), got "
                         f"{logits.shape} and {labels.shape}")


def softmax_cross_entropy_forward(logits: np.ndarray, labels: np.ndarray,
                                  ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    """(loss per row, softmax probabilities): loss[i] = −log softmax(logits[i])[labels[i]], 0 where labels[i] equals
    ``ignore_index``, NaN where a label lies outside [0, classes) (validate labels before, as the engine's op does)."""
    _checked_rows(logits, labels)
    classes = logits.shape[1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    total = probs.sum(axis=1)
    probs /= total[:, None]
    ignored = labels == ignore_index
    in_range = (labels >= 0) & (labels < classes)
    picked = shifted[np.arange(len(labels)), np.where(in_range, labels, 0)]
    loss = np.log(total) - picked
    loss = np.where(ignored, 0, np.where(in_range, loss, np.nan)).astype(logits.dtype, copy=False)
    return loss, probs


def softmax_cross_entropy_backward(probs: np.ndarray, labels: np.ndarray, row_scale: np.ndarray | float,
                                   ignore_index: int) -> np.ndarray:
    """(probs − onehot(labels)) · row_scale per row (a (rows,) array or one scalar for all); ignored rows 0,
    rows with an out-of-range label NaN."""
    _checked_rows(probs, labels)
    scale = np.broadcast_to(np.asarray(row_scale, probs.dtype), labels.shape)
    rows = np.arange(len(labels))
    in_range = (labels >= 0) & (labels < probs.shape[1])
    grad = probs * scale[:, None]
    grad[rows[in_range], labels[in_range]] -= scale[in_range]
    grad[~in_range] = np.nan
    grad[labels == ignore_index] = 0
    return grad


def _activate(value: np.ndarray, kind: str) -> np.ndarray:
    if kind == "relu":
        return np.where(value < 0, value.dtype.type(0), value)  # NaN stays NaN, as np.maximum
    from scipy.special import erf  # as engine/ops/activation.py
    return value * (0.5 * (1 + erf(value * _SQRT_HALF)))


def _check_bias(x: np.ndarray, bias: np.ndarray, kind: str) -> None:
    _float("bias_activation", x)
    if kind not in ACTIVATIONS:
        raise ValueError(f"bias_activation: kind must be one of {ACTIVATIONS}, got {kind!r}")
    if bias.ndim != 1 or x.ndim < 1 or x.shape[-1] != bias.shape[0] or bias.dtype != x.dtype:
        raise ValueError(f"bias_activation: bias must be ({x.shape[-1:]}) of {x.dtype}, got {bias.shape} {bias.dtype}")


def bias_activation_forward(x: np.ndarray, bias: np.ndarray, kind: str) -> np.ndarray:
    """activation(x + bias), bias broadcast on the last axis; ``kind`` 'relu' or 'gelu' (exact erf form)."""
    _check_bias(x, bias, kind)
    return _activate(x + bias, kind).astype(x.dtype, copy=False)


def bias_activation_backward(x: np.ndarray, bias: np.ndarray, grad_y: np.ndarray,
                             kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(grad_x, grad_bias) of activation(x + bias) given grad_y; x is the input before the bias."""
    _check_bias(x, bias, kind)
    value = x + bias
    if kind == "relu":
        grad_x = grad_y * (value > 0)
    else:
        from scipy.special import erf
        cdf = 0.5 * (1 + erf(value * _SQRT_HALF))
        pdf = np.exp(-0.5 * value * value) * _INV_SQRT_2PI
        grad_x = grad_y * (cdf + value * pdf)
    grad_x = grad_x.astype(x.dtype, copy=False)
    return grad_x, grad_x.reshape(-1, bias.shape[0]).sum(axis=0)


def _out_size(size: int, kernel: int, stride: int) -> int:
    if kernel < 1 or stride < 1 or size < kernel:
        raise ValueError(f"window: kernel {kernel} and stride {stride} do not fit a padded size of {size}")
    return (size - kernel) // stride + 1


def im2col(x: np.ndarray, kh: int, kw: int, stride_h: int, stride_w: int) -> np.ndarray:
    """(N, C·kh·kw, OH·OW) patches of a padded (N, C, H, W) input; row (c·kh + i)·kw + j, column oh·OW + ow holds
    x[n, c, oh·stride_h + i, ow·stride_w + j]."""
    _float("im2col", x)
    n, c, h, w = x.shape
    oh, ow = _out_size(h, kh, stride_h), _out_size(w, kw, stride_w)
    cols = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = x[:, :, i:i + stride_h * (oh - 1) + 1:stride_h, j:j + stride_w * (ow - 1) + 1:stride_w]
    return cols.reshape(n, c * kh * kw, oh * ow)


def col2im(cols: np.ndarray, padded_shape: Sequence[int], kh: int, kw: int, stride_h: int,
           stride_w: int) -> np.ndarray:
    """The adjoint of ``im2col``: each patch entry added back at its input position (overlaps summed, kernel
    offsets in row-major order)."""
    _float("col2im", cols)
    n, c, h, w = padded_shape
    oh, ow = _out_size(h, kh, stride_h), _out_size(w, kw, stride_w)
    if cols.shape != (n, c * kh * kw, oh * ow):
        raise ValueError(f"col2im: cols must be {(n, c * kh * kw, oh * ow)}, got {cols.shape}")
    patches = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h, w), cols.dtype)
    for i in range(kh):
        for j in range(kw):
            row_window = slice(i, i + stride_h * (oh - 1) + 1, stride_h)
            col_window = slice(j, j + stride_w * (ow - 1) + 1, stride_w)
            out[:, :, row_window, col_window] += patches[:, :, i, j]
    return out


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int) -> tuple[list[list[np.ndarray]], int, int]:
    oh, ow = _out_size(x.shape[2], kh, sh), _out_size(x.shape[3], kw, sw)
    views = [[x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] for j in range(kw)] for i in range(kh)]
    return views, oh, ow


def max_pool2d_forward(x: np.ndarray, kh: int, kw: int, sh: int, sw: int) -> tuple[np.ndarray, np.ndarray]:
    """(maximum of each window, flat int64 index into ``x`` of the element that gets its gradient). As
    engine/ops/pool.py: the maximum along each kernel row (first wins), then over the rows (first wins); NaN
    propagates to the output."""
    _float("max_pool2d", x)
    views, oh, ow = _windows(x, kh, kw, sh, sw)
    n, c, h, w = x.shape
    best = best_row = best_col = None
    for i in range(kh):
        row = views[i][0].copy()
        col = np.zeros(row.shape, np.int64)
        for j in range(1, kw):
            better = views[i][j] > row
            np.maximum(row, views[i][j], out=row)
            col[better] = j
        if best is None:
            best, best_row, best_col = row, np.zeros(row.shape, np.int64), col
        else:
            better = row > best
            np.maximum(best, row, out=best)
            best_row[better], best_col[better] = i, col[better]
    top = np.arange(oh)[:, None] * sh + best_row
    left = np.arange(ow)[None, :] * sw + best_col
    plane = (np.arange(n)[:, None, None, None] * c + np.arange(c)[None, :, None, None]) * (h * w)
    return best, (plane + top * w + left).astype(np.int64)


def max_pool2d_backward(grad_y: np.ndarray, argmax: np.ndarray, padded_shape: Sequence[int]) -> np.ndarray:
    """Each window's gradient added at its ``argmax`` (a flat index into the padded input)."""
    _float("max_pool2d_backward", grad_y)
    out = np.zeros(int(np.prod(padded_shape)), grad_y.dtype)
    np.add.at(out, argmax.reshape(-1), grad_y.reshape(-1))
    return out.reshape(tuple(padded_shape))


def avg_pool2d_forward(x: np.ndarray, kh: int, kw: int, sh: int, sw: int) -> np.ndarray:
    """Mean of each window: the sum in row-major kernel order times 1/(kh·kw) (padding counts, as the engine)."""
    _float("avg_pool2d", x)
    views, _, _ = _windows(x, kh, kw, sh, sw)
    out = np.zeros(views[0][0].shape, x.dtype)
    for row in views:
        for view in row:
            out += view
    out *= x.dtype.type(1.0 / (kh * kw))
    return out


def avg_pool2d_backward(grad_y: np.ndarray, padded_shape: Sequence[int], kh: int, kw: int, sh: int,
                        sw: int) -> np.ndarray:
    """grad_y · 1/(kh·kw) added to every element of its window (kernel offsets in row-major order)."""
    _float("avg_pool2d_backward", grad_y)
    share = grad_y * grad_y.dtype.type(1.0 / (kh * kw))
    out = np.zeros(tuple(padded_shape), grad_y.dtype)
    views, oh, ow = _windows(out, kh, kw, sh, sw)
    if share.shape != out.shape[:2] + (oh, ow):
        raise ValueError(f"avg_pool2d_backward: grad_y must be {out.shape[:2] + (oh, ow)}, got {share.shape}")
    for row in views:
        for view in row:
            view += share
    return out


def adam_step(params: list[np.ndarray], grads: list[np.ndarray], exp_avgs: list[np.ndarray],
              exp_avg_sqs: list[np.ndarray], *, lr: float, beta1: float, beta2: float, eps: float,
              weight_decay: float, step: int, decoupled: bool, amsgrad_max: list[np.ndarray] | None = None) -> None:
    """One Adam (``decoupled=False``, L2 penalty) or AdamW step of every parameter, in place, in the operation
    order of engine/optim/adam.py (torch's); ``amsgrad_max`` holds AMSGrad's running maxima of v."""
    lists = [params, grads, exp_avgs, exp_avg_sqs] + ([amsgrad_max] if amsgrad_max is not None else [])
    check_adam_lists(lists)
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    for index, (data, grad, exp_avg, exp_avg_sq) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if weight_decay != 0:
            if decoupled:
                np.multiply(data, 1 - lr * weight_decay, out=data)
            else:
                grad = grad + data * weight_decay
        exp_avg += (grad - exp_avg) * (1 - beta1)
        exp_avg_sq *= beta2
        exp_avg_sq += (grad * (1 - beta2)) * grad
        if amsgrad_max is not None:
            np.maximum(amsgrad_max[index], exp_avg_sq, out=amsgrad_max[index])
            denominator = np.sqrt(amsgrad_max[index])
        else:
            denominator = np.sqrt(exp_avg_sq)
        denominator = denominator / bias_correction2_sqrt + eps
        data += (exp_avg * -step_size) / denominator


def check_adam_lists(lists: list[list]) -> None:
    """Every list as long as the first, every array contiguous, of one float dtype and of its parameter's size."""
    params = lists[0]
    if any(len(arrays) != len(params) for arrays in lists):
        raise ValueError(f"adam_step: lists of different lengths {[len(arrays) for arrays in lists]}")
    if not params:
        return
    dtype = params[0].dtype
    _float("adam_step", params[0])
    for arrays in lists:
        for index, (array, param) in enumerate(zip(arrays, params)):
            if array.dtype != dtype or array.size != param.size or not array.flags.c_contiguous:
                raise ValueError(f"adam_step: array {index} must be a contiguous {dtype} array of {param.size} "
                                 f"elements, got {array.dtype} of {array.size}")


def segment_bounds(offsets: np.ndarray, sizes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, sizes) as int64: ``offsets`` are the starts when ``sizes`` is given, else segment boundaries
    (segment i is offsets[i]:offsets[i+1])."""
    offsets = np.asarray(offsets, np.int64).reshape(-1)
    if sizes is None:
        return offsets[:-1], np.diff(offsets)
    sizes = np.asarray(sizes, np.int64).reshape(-1)
    if sizes.shape != offsets.shape:
        raise ValueError(f"segment_statistics: {offsets.size} starts for {sizes.size} sizes")
    return offsets, sizes


def segment_statistics(flat: np.ndarray, offsets: np.ndarray,
                       sizes: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Per segment (see ``segment_bounds``): sum of squares accumulated in float64, minimum and maximum of the
    finite values (NaN when none; in ``flat``'s dtype), NaN count and ±Inf count (int64). An empty segment gives
    0, NaN, NaN, 0, 0. The contract of instrumentation/dynamics/segment_stats.py."""
    _float("segment_statistics", flat)
    starts, sizes = segment_bounds(offsets, sizes)
    if flat.ndim != 1 or (sizes < 0).any() or (starts < 0).any() or (starts + sizes > flat.size).any():
        raise ValueError(f"segment_statistics: segments must lie inside a 1-d buffer of {flat.size} elements")
    count = len(starts)
    sum_sq, nan_count, inf_count = np.zeros(count), np.zeros(count, np.int64), np.zeros(count, np.int64)
    minimum, maximum = np.full(count, np.nan, flat.dtype), np.full(count, np.nan, flat.dtype)
    for index, (start, size) in enumerate(zip(starts.tolist(), sizes.tolist())):
        wide = flat[start:start + size].astype(np.float64)
        nans, infs = np.isnan(wide), np.isinf(wide)
        nan_count[index], inf_count[index] = nans.sum(), infs.sum()
        sum_sq[index] = np.dot(wide, wide)
        finite = wide[~(nans | infs)]
        if finite.size:
            minimum[index], maximum[index] = finite.min(), finite.max()
    return sum_sq, minimum, maximum, nan_count, inf_count


def dead_unit_counts(activations: np.ndarray) -> np.ndarray:
    """Per unit (axis 1; over the batch and every position of an N-C-… output), how many values are not positive
    (NaN counts as not positive): a unit is dead when its count equals size / units, as
    instrumentation/dynamics/activations.py ``dead_fraction`` decides."""
    _float("dead_unit_counts", activations)
    if activations.ndim < 2:
        raise ValueError(f"dead_unit_counts: need a batch and a unit axis, got shape {activations.shape}")
    not_positive = ~(activations > 0)
    axes = (0,) + tuple(range(2, activations.ndim))
    return np.count_nonzero(not_positive, axis=axes).astype(np.int64)
