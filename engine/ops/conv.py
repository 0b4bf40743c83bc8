"""2-d convolution (cross-correlation, as PyTorch) by im2col: one sliding-window copy and one batched matmul."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from engine.backend import get_array_module
from engine.op import Function
from engine.ops._util import result_dtype, shape_nbytes


def pad2d(x: np.ndarray, padding: tuple[int, int, int, int], value: float = 0.0) -> np.ndarray:
    """Pad the last two axes by (top, bottom, left, right); no copy when there is nothing to pad."""
    top, bottom, left, right = padding
    if not (top or bottom or left or right):
        return x
    shape = x.shape[:-2] + (x.shape[-2] + top + bottom, x.shape[-1] + left + right)
    out = get_array_module(x).full(shape, value, dtype=x.dtype)
    out[..., top:top + x.shape[-2], left:left + x.shape[-1]] = x
    return out


def output_size(shape: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, int],
                padding: tuple[int, int, int, int]) -> tuple[int, int]:
    """(H_out, W_out) of a window op over the last two axes of an input of ``shape``."""
    top, bottom, left, right = padding
    return ((shape[-2] + top + bottom - kernel[0]) // stride[0] + 1,
            (shape[-1] + left + right - kernel[1]) // stride[1] + 1)


def windows(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int]) -> np.ndarray:
    """A (N, C, H_out, W_out, kh, kw) view of every kernel window of ``x`` (N, C, H, W); no copy."""
    view = sliding_window_view(x, kernel, axis=(2, 3))
    return view if stride == (1, 1) else view[:, :, ::stride[0], ::stride[1]]


def add_windows(grad_windows: np.ndarray, shape: tuple[int, ...], stride: tuple[int, int]) -> np.ndarray:
    """col2im: scatter-add (N, C, kh, kw, H_out, W_out) window gradients back into an array of ``shape``.

    One strided slice-add per kernel offset (kh·kw of them) instead of ``np.add.at`` over every element.
    """
    out = np.zeros(shape, dtype=grad_windows.dtype)
    _, _, kh, kw, h_out, w_out = grad_windows.shape
    sh, sw = stride
    for i in range(kh):
        for j in range(kw):
            out[:, :, i:i + sh * (h_out - 1) + 1:sh, j:j + sw * (w_out - 1) + 1:sw] += grad_windows[:, :, i, j]
    return out


class Conv2d(Function):
    """x (N, C, H, W) ⋆ weight (O, C, kh, kw) (+ bias (O,)) → (N, O, H_out, W_out)."""

    keeps_output = False  # saves the input's windows and the weight only
    cuda_kernel = "im2col"  # kernels/im2col.cu: the CuPy branch's im2col and col2im

    def __init__(self, stride: tuple[int, int], padding: tuple[int, int, int, int]) -> None:
        self.stride, self.padding = stride, padding

    def forward(self, x, weight, bias=None):
        if self.xp is not np:
            return self._forward_gpu(x, weight, bias)
        n, c = x.shape[:2]
        out_channels, _, kh, kw = weight.shape
        padded = pad2d(x, self.padding)
        view = windows(padded, (kh, kw), self.stride)
        h_out, w_out = view.shape[2:4]
        # cols[:, n] is the (C·kh·kw, H_out·W_out) patch matrix of image n: out[n] = W (O, C·kh·kw) @ cols[:, n]
        cols = view.transpose(1, 4, 5, 0, 2, 3).reshape(c * kh * kw, n, h_out * w_out)
        out = np.matmul(weight.reshape(out_channels, -1), cols.transpose(1, 0, 2))
        if bias is not None:
            out += bias[:, None]
        self.cols, self.weight, self.padded_shape, self.has_bias = cols, weight, padded.shape, bias is not None
        return out.reshape(n, out_channels, h_out, w_out)

    def _forward_gpu(self, x, weight, bias):
        """The CuPy branch: the im2col kernel gives cols (N, C·kh·kw, H_out·W_out); one batched cuBLAS product."""
        from engine.backend.cuda import kernels
        xp = self.xp
        n, out_channels, (kh, kw) = x.shape[0], weight.shape[0], weight.shape[2:]
        padded = xp.ascontiguousarray(pad2d(x, self.padding))
        cols = kernels.im2col(padded, kh, kw, self.stride[0], self.stride[1])
        h_out, w_out = output_size(x.shape, (kh, kw), self.stride, self.padding)
        out = xp.matmul(weight.reshape(out_channels, -1), cols)
        if bias is not None:
            out += bias[:, None]
        self.cols, self.weight, self.padded_shape, self.has_bias = cols, weight, padded.shape, bias is not None
        return out.reshape(n, out_channels, h_out, w_out)

    def _backward_gpu(self, grad):
        from engine.backend.cuda import kernels
        xp, cols, weight = self.xp, self.cols, self.weight
        n, out_channels = grad.shape[:2]
        g = grad.reshape(n, out_channels, -1)
        gx = gw = None
        if self.needs_input_grad[1]:
            gw = xp.tensordot(g, cols, axes=([0, 2], [0, 2])).reshape(weight.shape)
        if self.needs_input_grad[0]:
            grad_cols = xp.ascontiguousarray(xp.matmul(weight.reshape(out_channels, -1).T, g))
            _, _, kh, kw = weight.shape
            gx = kernels.col2im(grad_cols, self.padded_shape, kh, kw, self.stride[0], self.stride[1])
            gx = crop2d(gx, self.padding)
        if not self.has_bias:
            return gx, gw
        return gx, gw, grad.sum(axis=(0, 2, 3)) if self.needs_input_grad[2] else None

    def output_nbytes(self, x, weight, bias=None):
        """(N, O, H_out, W_out); the im2col copy made on the way is scratch (not counted, as NumPy's)."""
        h_out, w_out = output_size(x.shape, weight.shape[2:], self.stride, self.padding)
        return shape_nbytes((x.shape[0], weight.shape[0], h_out, w_out), result_dtype(x, weight))

    def backward(self, grad):
        if self.xp is not np:
            return self._backward_gpu(grad)
        cols, weight = self.cols, self.weight
        n, out_channels = grad.shape[:2]
        patch, _, positions = cols.shape
        g = grad.reshape(n, out_channels, positions)
        gx = gw = gb = None
        if self.needs_input_grad[1]:
            if patch < positions:  # few patch rows: N small products beat copying grad for one big GEMM
                gw = np.matmul(g, cols.transpose(1, 2, 0)).sum(axis=0)
            else:  # one GEMM over all images (fewer, larger BLAS calls)
                g_rows = np.ascontiguousarray(g.transpose(1, 0, 2)).reshape(out_channels, n * positions)
                gw = g_rows @ cols.reshape(patch, n * positions).T
            gw = gw.reshape(weight.shape)
        if self.needs_input_grad[0]:
            _, c, kh, kw = weight.shape
            grad_cols = np.matmul(weight.reshape(out_channels, -1).T, g)
            grad_cols = grad_cols.reshape(n, c, kh, kw, grad.shape[2], grad.shape[3])
            gx = crop2d(add_windows(grad_cols, self.padded_shape, self.stride), self.padding)
        if not self.has_bias:
            return gx, gw
        if self.needs_input_grad[2]:
            gb = grad.sum(axis=(0, 2, 3))
        return gx, gw, gb


def crop2d(padded: np.ndarray, padding: tuple[int, int, int, int]) -> np.ndarray:
    """Undo ``pad2d``: the interior of the last two axes (a view)."""
    top, bottom, left, right = padding
    if not (top or bottom or left or right):
        return padded
    return padded[..., top:padded.shape[-2] - bottom, left:padded.shape[-1] - right]
