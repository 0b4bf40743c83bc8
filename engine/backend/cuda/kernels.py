"""Launchers of the engine's own CUDA kernels (kernels/*.cu): CuPy arrays in and out, float32 and float64.

Names, signatures and semantics are those of ``engine/backend/kernel_reference.py`` (NumPy arrays there). A kernel is
found by its name in the sources that define it (``sources.entry_sources``), compiled with NVRTC through
``cupy.RawModule`` on first use and cached per source, options and device. Imported only for CuPy inputs (the ops
import it inside their CuPy branch; each such op names its source in ``cuda_kernel``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from engine.backend import kernel_reference as ref
from engine.backend.cuda.sources import OPTIONS, entry_sources, read_source
from engine.backend.cuda_backend import require_cupy

cp = require_cupy()

THREADS = 256
MAX_BLOCKS = 1 << 16  # grid-stride loops cover the rest
ADAM_CHUNK = 4096  # elements per block of the multi-tensor Adam step
STATS_CHUNK = 8192  # elements per block of the segment statistics
_CACHE_LIMIT = 32

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_modules: dict[tuple[str, tuple[str, ...], int], Any] = {}
_functions: dict[tuple[str, np.dtype, int], Any] = {}


def module(source: str) -> Any:
    """The compiled ``cupy.RawModule`` of kernels/<source>.cu on the current device (compiled once, then cached)."""
    key = (source, OPTIONS, cp.cuda.Device().id)
    found = _modules.get(key)
    if found is None:
        found = _modules[key] = cp.RawModule(code=read_source(source), options=OPTIONS)
    return found


def code_module(code: str) -> Any:
    """The compiled ``cupy.RawModule`` of generated CUDA C (the fused elementwise chains), cached by the text."""
    key = (code, OPTIONS, cp.cuda.Device().id)
    found = _modules.get(key)
    if found is None:
        found = _modules[key] = cp.RawModule(code=code, options=OPTIONS)
    return found


def _kernel(name: str, dtype: np.dtype) -> Any:
    key = (name, np.dtype(dtype), cp.cuda.Device().id)
    found = _functions.get(key)
    if found is None:
        if key[1] not in _SUFFIX:
            raise TypeError(f"{name}: float32 or float64 arrays only, got {dtype}")
        source = entry_sources().get(name)
        if source is None:
            raise KeyError(f"no CUDA kernel {name!r} in engine/backend/cuda/kernels/*.cu")
        found = _functions[key] = module(source).get_function(f"{name}_{_SUFFIX[key[1]]}")
    return found


def _blocks(total: int, threads: int = THREADS) -> int:
    return max(1, min(-(-total // threads), MAX_BLOCKS))


def _contiguous(name: str, array: Any) -> Any:
    if not isinstance(array, cp.ndarray):
        raise TypeError(f"{name}: expected a cupy array, got {type(array).__name__}")
    if array.dtype not in _SUFFIX:
        raise TypeError(f"{name}: float32 or float64 arrays only, got {array.dtype}")
    return cp.ascontiguousarray(array)


def _labels(labels: Any, rows: int) -> Any:
    labels = cp.ascontiguousarray(cp.asarray(labels, dtype=cp.int64))
    if labels.shape != (rows,):
        raise ValueError(f"softmax_cross_entropy: labels must be ({rows},), got {labels.shape}")
    return labels


# --- softmax cross-entropy ------------------------------------------------------------------------

def softmax_cross_entropy_forward(logits: Any, labels: Any, ignore_index: int) -> tuple[Any, Any]:
    logits = _contiguous("softmax_cross_entropy_forward", logits)
    if logits.ndim != 2:
        raise ValueError(f"softmax_cross_entropy_forward: logits must be (rows, classes), got {logits.shape}")
    rows, classes = logits.shape
    labels = _labels(labels, rows)
    loss, probs = cp.empty(rows, logits.dtype), cp.empty_like(logits)
    if rows and classes:
        threads = min(THREADS, max(32, 1 << (classes - 1).bit_length()))
        _kernel("softmax_xent_forward", logits.dtype)(
            (rows,), (threads,), (logits, labels, np.int32(classes), np.int64(ignore_index), loss, probs))
    return loss, probs


def softmax_cross_entropy_backward(probs: Any, labels: Any, row_scale: Any, ignore_index: int) -> Any:
    probs = _contiguous("softmax_cross_entropy_backward", probs)
    rows, classes = probs.shape
    labels = _labels(labels, rows)
    if isinstance(row_scale, cp.ndarray) and row_scale.ndim == 1:
        scale, stride = cp.ascontiguousarray(row_scale, dtype=probs.dtype), 1
        if scale.shape != (rows,):
            raise ValueError(f"softmax_cross_entropy_backward: row_scale must be ({rows},), got {scale.shape}")
    elif isinstance(row_scale, cp.ndarray):  # a 0-d device scalar
        scale, stride = row_scale.reshape(1).astype(probs.dtype), 0
    else:
        scale, stride = cp.full(1, float(row_scale), probs.dtype), 0
    grad = cp.empty_like(probs)
    if grad.size:
        _kernel("softmax_xent_backward", probs.dtype)(
            (_blocks(grad.size),), (THREADS,), (probs, labels, scale, np.int64(stride), np.int64(rows),
                                                np.int32(classes), np.int64(ignore_index), grad))
    return grad


# --- bias + activation ----------------------------------------------------------------------------

def _bias_args(x: Any, bias: Any, kind: str) -> tuple[Any, Any, int]:
    x, bias = _contiguous("bias_activation", x), _contiguous("bias_activation", bias)
    ref._check_bias(x, bias, kind)
    return x, bias, ref.ACTIVATIONS.index(kind)


def bias_activation_forward(x: Any, bias: Any, kind: str) -> Any:
    x, bias, code = _bias_args(x, bias, kind)
    y = cp.empty_like(x)
    if y.size:
        _kernel("bias_activation_forward", x.dtype)(
            (_blocks(x.size),), (THREADS,), (x, bias, np.int64(x.size), np.int64(bias.size), np.int32(code), y))
    return y


def bias_activation_backward(x: Any, bias: Any, grad_y: Any, kind: str) -> tuple[Any, Any]:
    x, bias, code = _bias_args(x, bias, kind)
    grad_y = _contiguous("bias_activation_backward", grad_y)
    if grad_y.shape != x.shape or grad_y.dtype != x.dtype:
        raise ValueError(f"bias_activation_backward: grad_y must be {x.shape} {x.dtype}, got {grad_y.shape} "
                         f"{grad_y.dtype}")
    cols = bias.size
    rows = x.size // cols if cols else 0
    grad_x, grad_bias = cp.empty_like(x), cp.zeros(cols, x.dtype)
    if not x.size:
        return grad_x, grad_bias
    slices = max(1, min(-(-rows // 64), 65535))  # at least 64 rows (8 per thread) per block
    partial = cp.empty((slices, cols), x.dtype)
    _kernel("bias_activation_backward", x.dtype)(
        (-(-cols // 32), slices), (32, 8), (x, bias, grad_y, np.int64(rows), np.int64(cols), np.int32(code), grad_x,
                                            partial))
    _kernel("bias_grad_sum", x.dtype)((_blocks(cols),), (THREADS,), (partial, np.int64(slices), np.int64(cols),
                                                                    grad_bias))
    return grad_x, grad_bias


# --- im2col / col2im, pools -----------------------------------------------------------------------

def _window_args(shape: Sequence[int], kh: int, kw: int, sh: int, sw: int) -> tuple[Any, ...]:
    n, c, h, w = (int(s) for s in shape)
    oh, ow = ref._out_size(h, kh, sh), ref._out_size(w, kw, sw)
    return n, c, h, w, oh, ow


def im2col(x: Any, kh: int, kw: int, stride_h: int, stride_w: int) -> Any:
    x = _contiguous("im2col", x)
    n, c, h, w, oh, ow = _window_args(x.shape, kh, kw, stride_h, stride_w)
    cols = cp.empty((n, c * kh * kw, oh * ow), x.dtype)
    if cols.size:
        _kernel("im2col", x.dtype)((_blocks(cols.size),), (THREADS,), (
            x, np.int64(n), np.int64(c), np.int64(h), np.int64(w), np.int32(kh), np.int32(kw), np.int32(stride_h),
            np.int32(stride_w), np.int64(oh), np.int64(ow), cols))
    return cols


def col2im(cols: Any, padded_shape: Sequence[int], kh: int, kw: int, stride_h: int, stride_w: int) -> Any:
    cols = _contiguous("col2im", cols)
    n, c, h, w, oh, ow = _window_args(padded_shape, kh, kw, stride_h, stride_w)
    if cols.shape != (n, c * kh * kw, oh * ow):
        raise ValueError(f"col2im: cols must be {(n, c * kh * kw, oh * ow)}, got {cols.shape}")
    x = cp.empty((n, c, h, w), cols.dtype)
    if x.size:
        _kernel("col2im", cols.dtype)((_blocks(x.size),), (THREADS,), (
            cols, np.int64(n), np.int64(c), np.int64(h), np.int64(w), np.int32(kh), np.int32(kw), np.int32(stride_h),
            np.int32(stride_w), np.int64(oh), np.int64(ow), x))
    return x


def _pool_args(shape: Sequence[int], kh: int, kw: int, sh: int, sw: int) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    n, c, h, w, oh, ow = _window_args(shape, kh, kw, sh, sw)
    args = (np.int64(n * c), np.int64(h), np.int64(w), np.int32(kh), np.int32(kw), np.int32(sh), np.int32(sw),
            np.int64(oh), np.int64(ow))
    return (n, c, oh, ow), args


def max_pool2d_forward(x: Any, kh: int, kw: int, sh: int, sw: int) -> tuple[Any, Any]:
    x = _contiguous("max_pool2d_forward", x)
    shape, args = _pool_args(x.shape, kh, kw, sh, sw)
    y, argmax = cp.empty(shape, x.dtype), cp.empty(shape, cp.int64)
    if y.size:
        _kernel("max_pool_forward", x.dtype)((_blocks(y.size),), (THREADS,), (x, *args, y, argmax))
    return y, argmax


def max_pool2d_backward(grad_y: Any, argmax: Any, padded_shape: Sequence[int]) -> Any:
    grad_y = _contiguous("max_pool2d_backward", grad_y)
    argmax = cp.ascontiguousarray(argmax, dtype=cp.int64)
    if argmax.shape != grad_y.shape:
        raise ValueError(f"max_pool2d_backward: argmax {argmax.shape} and grad_y {grad_y.shape} differ")
    grad_x = cp.zeros(tuple(int(s) for s in padded_shape), grad_y.dtype)
    if grad_y.size:
        _kernel("max_pool_backward", grad_y.dtype)((_blocks(grad_y.size),), (THREADS,), (
            grad_y, argmax, np.int64(grad_y.size), grad_x))
    return grad_x


def avg_pool2d_forward(x: Any, kh: int, kw: int, sh: int, sw: int) -> Any:
    x = _contiguous("avg_pool2d_forward", x)
    shape, args = _pool_args(x.shape, kh, kw, sh, sw)
    y = cp.empty(shape, x.dtype)
    if y.size:
        _kernel("avg_pool_forward", x.dtype)((_blocks(y.size),), (THREADS,), (x, *args, y))
    return y


def avg_pool2d_backward(grad_y: Any, padded_shape: Sequence[int], kh: int, kw: int, sh: int, sw: int) -> Any:
    grad_y = _contiguous("avg_pool2d_backward", grad_y)
    shape, args = _pool_args(padded_shape, kh, kw, sh, sw)
    if grad_y.shape != shape:
        raise ValueError(f"avg_pool2d_backward: grad_y must be {shape}, got {grad_y.shape}")
    grad_x = cp.empty(tuple(int(s) for s in padded_shape), grad_y.dtype)
    if grad_x.size:
        _kernel("avg_pool_backward", grad_y.dtype)((_blocks(grad_x.size),), (THREADS,), (grad_y, *args, grad_x))
    return grad_x


# --- Adam / AdamW over all parameters -------------------------------------------------------------

_adam_tables: dict[tuple, Any] = {}


def _adam_table(lists: list[list[Any]], amsgrad: bool) -> tuple[Any, int, int]:
    """The device table of adam.cu (addresses, sizes, chunks), cached by the addresses and sizes."""
    sizes = [int(p.size) for p in lists[0]]
    addresses = [[int(a.data.ptr) for a in arrays] for arrays in lists]
    if not amsgrad:
        addresses.append([0] * len(sizes))
    key = (cp.cuda.Device().id, tuple(sizes), tuple(map(tuple, addresses)))
    found = _adam_tables.get(key)
    if found is None:
        chunk_tensor = [t for t, size in enumerate(sizes) for _ in range(0, size, ADAM_CHUNK)]
        chunk_start = [start for size in sizes for start in range(0, size, ADAM_CHUNK)]
        host = np.array([a for row in addresses for a in row] + sizes + chunk_tensor + chunk_start, np.uint64)
        if len(_adam_tables) >= _CACHE_LIMIT:
            _adam_tables.clear()
        found = _adam_tables[key] = (cp.asarray(host.view(np.int64)), len(sizes), len(chunk_start))
    return found


def adam_step(params: list[Any], grads: list[Any], exp_avgs: list[Any], exp_avg_sqs: list[Any], *, lr: float,
              beta1: float, beta2: float, eps: float, weight_decay: float, step: int, decoupled: bool,
              amsgrad_max: list[Any] | None = None) -> None:
    lists = [params, grads, exp_avgs, exp_avg_sqs] + ([amsgrad_max] if amsgrad_max is not None else [])
    ref.check_adam_lists(lists)
    if not params:
        return
    table, tensors, chunks = _adam_table(lists, amsgrad_max is not None)
    if not chunks:
        return
    t = params[0].dtype.type
    mode = (weight_decay != 0) | (decoupled << 1) | ((amsgrad_max is not None) << 2)
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    _kernel("adam_step", params[0].dtype)((chunks,), (THREADS,), (
        table, np.int32(tensors), np.int32(chunks), np.int64(ADAM_CHUNK), t(1 - lr * weight_decay), t(weight_decay),
        t(1 - beta1), t(beta2), t(1 - beta2), t(-step_size), t(bias_correction2_sqrt), t(eps), np.int32(mode)))


# --- statistics for watch() -----------------------------------------------------------------------

_stats_layouts: dict[tuple, tuple[Any, Any, Any, int]] = {}


def _stats_layout(starts: np.ndarray, sizes: np.ndarray) -> tuple[Any, Any, Any, int]:
    """(device table, partials, zeroed counters, chunks) of statistics.cu for one segment layout, cached."""
    key = (cp.cuda.Device().id, starts.tobytes(), sizes.tobytes())
    found = _stats_layouts.get(key)
    if found is None:
        segment_of, first, end, first_chunk, chunk_count = [], [], [], [], []
        for index, (start, size) in enumerate(zip(starts.tolist(), sizes.tolist())):
            bounds = list(range(start, start + size, STATS_CHUNK)) or [start]  # an empty segment gets an empty chunk
            first_chunk.append(len(segment_of))
            chunk_count.append(len(bounds))
            segment_of += [index] * len(bounds)
            first += bounds
            end += [min(b + STATS_CHUNK, start + size) for b in bounds]
        table = cp.asarray(np.array(segment_of + first + end + first_chunk + chunk_count, np.int64))
        if len(_stats_layouts) >= _CACHE_LIMIT:
            _stats_layouts.clear()
        found = _stats_layouts[key] = (table, cp.empty(5 * len(segment_of), cp.float64),
                                       cp.zeros(len(starts), cp.uint32), len(segment_of))
    return found


def segment_statistics_packed(flat: Any, offsets: Any, sizes: Any = None) -> Any:
    """One launch: a (5, segments) float64 array of sums of squares, finite minima, finite maxima (NaN: none),
    NaN counts and Inf counts. NOTE: a layout's scratch is shared: launch on one stream at a time per layout."""
    flat = _contiguous("segment_statistics", flat)
    starts, sizes = ref.segment_bounds(cp.asnumpy(offsets), None if sizes is None else cp.asnumpy(sizes))
    if flat.ndim != 1 or (sizes < 0).any() or (starts < 0).any() or (starts + sizes > flat.size).any():
        raise ValueError(f"segment_statistics: segments must lie inside a 1-d buffer of {flat.size} elements")
    out = cp.empty((5, len(starts)), cp.float64)
    if not len(starts):
        return out
    table, partials, counters, chunks = _stats_layout(starts, sizes)
    _kernel("segment_stats", flat.dtype)((chunks,), (THREADS,), (
        flat, table, np.int32(len(starts)), np.int32(chunks), partials, counters, out))
    return out


def segment_statistics(flat: Any, offsets: Any, sizes: Any = None) -> tuple[Any, ...]:
    packed = segment_statistics_packed(flat, offsets, sizes)
    return (packed[0], packed[1].astype(flat.dtype), packed[2].astype(flat.dtype), packed[3].astype(cp.int64),
            packed[4].astype(cp.int64))


def segment_statistics_host(flat: Any, offsets: Any, sizes: Any = None) -> tuple[np.ndarray, ...]:
    """``segment_statistics`` as NumPy arrays, with one device-to-host copy."""
    packed = cp.asnumpy(segment_statistics_packed(flat, offsets, sizes))
    return (packed[0], packed[1].astype(flat.dtype), packed[2].astype(flat.dtype), packed[3].astype(np.int64),
            packed[4].astype(np.int64))


def dead_unit_counts(activations: Any) -> Any:
    a = _contiguous("dead_unit_counts", activations)
    if a.ndim < 2:
        raise ValueError(f"dead_unit_counts: need a batch and a unit axis, got shape {a.shape}")
    batch, units = a.shape[:2]
    positions = a.size // (batch * units) if batch * units else 0
    counts = cp.zeros(units, cp.int64)
    if not a.size:
        return counts
    if positions == 1:
        slices = max(1, min(-(-batch // 64), 65535))
        _kernel("dead_units_rows", a.dtype)((-(-units // 32), slices), (32, 8), (
            a, np.int64(batch), np.int64(units), counts))
    else:
        _kernel("dead_units_planes", a.dtype)((batch * units,), (THREADS,), (
            a, np.int64(units), np.int64(positions), counts))
    return counts
