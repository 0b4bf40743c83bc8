"""Every CUDA kernel launcher against its NumPy reference, written once for any CuPy-like module ``cp`` and launcher
module ``kernels``: run on a GPU by tests/gpu/test_kernels_gpu.py and, on the CPU, by
tests/engine/test_kernels_emulated.py (the same CUDA C compiled as C++ with one thread per CUDA thread)."""
from __future__ import annotations

import numpy as np

from engine.backend import kernel_reference as ref

DTYPES = (np.float32, np.float64)
CLOSE = {np.float32: 3e-6, np.float64: 1e-13}


def _close(got, expected, dtype, scale: float = 1.0) -> None:
    np.testing.assert_allclose(got, expected, rtol=CLOSE[dtype] * scale, atol=CLOSE[dtype] * scale)


def softmax_cross_entropy(cp, kernels, dtype) -> None:
    rng = np.random.default_rng(0)
    for rows, classes in ((37, 11), (5, 300), (3, 1)):
        logits = (rng.standard_normal((rows, classes)) * 3).astype(dtype)
        labels = rng.integers(0, classes, rows).astype(np.int64)
        labels[0], labels[-1] = -100, classes  # ignored; out of range (NaN row)
        loss, probs = kernels.softmax_cross_entropy_forward(cp.asarray(logits), cp.asarray(labels), -100)
        expected_loss, expected_probs = ref.softmax_cross_entropy_forward(logits, labels, -100)
        assert loss.dtype == dtype and probs.dtype == dtype
        _close(cp.asnumpy(loss), expected_loss, dtype, 4)
        _close(cp.asnumpy(probs), expected_probs, dtype, 4)
        row_scale = rng.random(rows).astype(dtype)
        for scale in (cp.asarray(row_scale), 0.25):
            grad = kernels.softmax_cross_entropy_backward(probs, cp.asarray(labels), scale, -100)
            expected = ref.softmax_cross_entropy_backward(expected_probs, labels,
                                                          row_scale if not isinstance(scale, float) else scale, -100)
            _close(cp.asnumpy(grad), expected, dtype, 4)


def bias_activation(cp, kernels, dtype) -> None:
    rng = np.random.default_rng(1)
    for shape in ((16, 9), (3, 5, 9), (300, 70)):
        x = (rng.standard_normal(shape) * 2).astype(dtype)
        bias = rng.standard_normal(shape[-1]).astype(dtype)
        grad_y = rng.standard_normal(shape).astype(dtype)
        for kind in ref.ACTIVATIONS:
            y = kernels.bias_activation_forward(cp.asarray(x), cp.asarray(bias), kind)
            _close(cp.asnumpy(y), ref.bias_activation_forward(x, bias, kind), dtype, 4)
            grad_x, grad_bias = kernels.bias_activation_backward(cp.asarray(x), cp.asarray(bias), cp.asarray(grad_y),
                                                                 kind)
            expected_x, expected_bias = ref.bias_activation_backward(x, bias, grad_y, kind)
            _close(cp.asnumpy(grad_x), expected_x, dtype, 4)
            _close(cp.asnumpy(grad_bias), expected_bias, dtype, 64)


def im2col_col2im(cp, kernels, dtype) -> None:
    rng = np.random.default_rng(2)
    for shape, kernel, stride in (((2, 3, 7, 6), (3, 2), (1, 1)), ((1, 2, 9, 9), (3, 3), (2, 3))):
        x = rng.standard_normal(shape).astype(dtype)
        cols = kernels.im2col(cp.asarray(x), *kernel, *stride)
        expected = ref.im2col(x, *kernel, *stride)
        np.testing.assert_array_equal(cp.asnumpy(cols), expected)
        grad_cols = rng.standard_normal(expected.shape).astype(dtype)
        back = kernels.col2im(cp.asarray(grad_cols), shape, *kernel, *stride)
        np.testing.assert_array_equal(cp.asnumpy(back), ref.col2im(grad_cols, shape, *kernel, *stride))


def pools(cp, kernels, dtype) -> None:
    rng = np.random.default_rng(3)
    for shape, kernel, stride in (((2, 3, 8, 8), 2, 2), ((2, 2, 9, 11), 3, 2), ((1, 2, 6, 6), 3, 1)):
        for x in (rng.standard_normal(shape).astype(dtype), rng.integers(0, 3, shape).astype(dtype)):  # ties too
            y, argmax = kernels.max_pool2d_forward(cp.asarray(x), kernel, kernel, stride, stride)
            expected_y, expected_argmax = ref.max_pool2d_forward(x, kernel, kernel, stride, stride)
            np.testing.assert_array_equal(cp.asnumpy(y), expected_y)
            np.testing.assert_array_equal(cp.asnumpy(argmax), expected_argmax)
            grad_y = rng.standard_normal(expected_y.shape).astype(dtype)
            grad_x = kernels.max_pool2d_backward(cp.asarray(grad_y), argmax, shape)
            _close(cp.asnumpy(grad_x), ref.max_pool2d_backward(grad_y, expected_argmax, shape), dtype)
        y = kernels.avg_pool2d_forward(cp.asarray(x), kernel, kernel, stride, stride)
        expected_y = ref.avg_pool2d_forward(x, kernel, kernel, stride, stride)
        np.testing.assert_array_equal(cp.asnumpy(y), expected_y)
        grad_x = kernels.avg_pool2d_backward(cp.asarray(grad_y), shape, kernel, kernel, stride, stride)
        np.testing.assert_array_equal(cp.asnumpy(grad_x), ref.avg_pool2d_backward(grad_y, shape, kernel, kernel,
                                                                                   stride, stride))


def adam(cp, kernels, dtype) -> None:
    """Several steps of every configuration, all parameters in one launch: equal to the reference bit for bit."""
    rng = np.random.default_rng(4)
    sizes = (5000, 3, 0, 1, 4097)  # more than one chunk, an empty parameter
    for decoupled, weight_decay, amsgrad in ((False, 0.0, False), (False, 0.1, True), (True, 0.01, False),
                                             (True, 0.05, True)):
        host = [[rng.standard_normal(n).astype(dtype) for n in sizes]] + [[np.zeros(n, dtype) for n in sizes]
                                                                          for _ in range(3)]
        device = [[cp.asarray(a) for a in arrays] for arrays in host]
        for step in (1, 2, 3):
            grads = [rng.standard_normal(n).astype(dtype) for n in sizes]
            hyper = dict(lr=0.01, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=weight_decay, step=step,
                         decoupled=decoupled)
            ref.adam_step(host[0], grads, host[1], host[2], amsgrad_max=host[3] if amsgrad else None, **hyper)
            kernels.adam_step(device[0], [cp.asarray(g) for g in grads], device[1], device[2],
                              amsgrad_max=device[3] if amsgrad else None, **hyper)
        for arrays, expected in zip(device, host):
            for got, want in zip(arrays, expected):
                np.testing.assert_array_equal(cp.asnumpy(got), want)


def segment_statistics(cp, kernels, dtype) -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(n).astype(dtype) for n in (300, 0, 1, 20000, 17, 8192)]
    arrays[3][[5, 9000]] = np.nan
    arrays[3][11] = np.inf
    arrays[4][:] = -np.inf
    starts = np.cumsum([0] + [a.size + 3 for a in arrays[:-1]])  # gaps between the segments are not read
    flat = np.full(int(starts[-1] + arrays[-1].size + 5), 1e30, dtype)
    for start, a in zip(starts, arrays):
        flat[start:start + a.size] = a
    sizes = np.array([a.size for a in arrays])
    expected = ref.segment_statistics(flat, starts, sizes)
    for _ in range(2):  # the second launch reuses the layout's scratch (its counters reset themselves)
        got = kernels.segment_statistics(cp.asarray(flat), starts, sizes)
        np.testing.assert_allclose(cp.asnumpy(got[0]), expected[0], rtol=1e-13)
        for mine, theirs in zip(got[1:], expected[1:]):
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(cp.asnumpy(mine), theirs)


def segment_stats_hook(cp, kernels, dtype) -> None:
    """instrumentation's segment_stats on a CuPy buffer (one launch) equals its CPU path."""
    from instrumentation.dynamics.segment_stats import Segments, pack, segment_stats

    rng = np.random.default_rng(6)
    for poison in (False, True):
        arrays = [rng.standard_normal(n).astype(dtype) for n in (100, 0, 9000, 3)]
        if poison:
            arrays[2][7] = np.nan
        segments = Segments.from_sizes([a.size for a in arrays])
        flat = pack(arrays, segments.pads(np.dtype(dtype)), np.empty(segments.total, dtype))
        for extremes in (True, False):
            expected = segment_stats(flat, segments, extremes=extremes)
            got = segment_stats(cp.asarray(flat), segments, extremes=extremes)
            assert got.recounted == expected.recounted and got.sum_squares.dtype == expected.sum_squares.dtype
            np.testing.assert_allclose(got.sum_squares, expected.sum_squares, rtol=CLOSE[dtype] * 4)
            for mine, theirs in zip(got[1:5], expected[1:5]):
                np.testing.assert_array_equal(mine, theirs)


def dead_units(cp, kernels, dtype) -> None:
    rng = np.random.default_rng(7)
    for shape in ((300, 70), (4, 3, 5, 6), (2, 600)):
        a = np.maximum(rng.standard_normal(shape) - 0.5, 0).astype(dtype)
        a[:, 1] = 0
        a.reshape(-1)[3] = np.nan
        counts = kernels.dead_unit_counts(cp.asarray(a))
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(cp.asnumpy(counts), ref.dead_unit_counts(a))


CASES = (softmax_cross_entropy, bias_activation, im2col_col2im, pools, adam, segment_statistics, segment_stats_hook,
         dead_units)
