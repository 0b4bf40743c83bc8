"""2-d max and average pooling over kernel-offset views: kh·kw strided slices, no window copies or argmax."""
from __future__ import annotations

import numpy as np

from engine.op import Function
from engine.ops._util import shape_nbytes
from engine.ops.conv import crop2d, output_size, pad2d


def _first_max(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """Elementwise maximum of ``arrays`` and which one held it first (None for one array, bool for two, int8)."""
    if len(arrays) == 1:
        return arrays[0], None
    out = np.maximum(arrays[0], arrays[1])
    index = arrays[1] > arrays[0]
    if len(arrays) == 2:
        return out, index
    index = index.astype(np.int8)
    for k in range(2, len(arrays)):
        better = arrays[k] > out
        np.maximum(out, arrays[k], out=out)
        np.putmask(index, better, k)
    return out, index


def _route(grad: np.ndarray, index: np.ndarray | None, count: int) -> list[np.ndarray]:
    """Split ``grad`` among ``count`` candidates by the ``index`` that ``_first_max`` returned."""
    if index is None:
        return [grad]
    if index.dtype == np.bool_:
        second = grad * index
        return [grad - second, second]
    return [grad * (index == k) for k in range(count)]


class _Pool2d(Function):
    cuda_kernel = "pool"  # kernels/pool.cu: the CuPy branches' max and average pooling

    def __init__(self, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int, int, int]) -> None:
        self.kernel, self.stride, self.padding = kernel, stride, padding

    def output_nbytes(self, x):
        return shape_nbytes(x.shape[:2] + output_size(x.shape, self.kernel, self.stride, self.padding), x.dtype)

    def _offsets(self, x: np.ndarray) -> tuple[list[list[np.ndarray]], tuple[int, int]]:
        """For each kernel offset (i, j) the strided view x[:, :, i + sh·r, j + sw·c] over every window (r, c)."""
        kh, kw = self.kernel
        sh, sw = self.stride
        h_out, w_out = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
        views = [[x[:, :, i:i + sh * (h_out - 1) + 1:sh, j:j + sw * (w_out - 1) + 1:sw] for j in range(kw)]
                 for i in range(kh)]
        return views, (h_out, w_out)

    def _scatter(self, grads: list[list[np.ndarray]], dtype: np.dtype) -> np.ndarray:
        """Input gradient from one gradient array per kernel offset (accumulated where windows overlap)."""
        n, c, h, w = self.shape
        top, bottom, left, right = self.padding
        gx = np.zeros((n, c, h + top + bottom, w + left + right), dtype=dtype)
        views, _ = self._offsets(gx)
        overlap = self.stride[0] < self.kernel[0] or self.stride[1] < self.kernel[1]
        for row_views, row_grads in zip(views, grads):
            for view, g in zip(row_views, row_grads):
                if overlap:
                    view += g
                else:
                    view[...] = g
        return gx[:, :, top:top + h, left:left + w] if any(self.padding) else gx


class MaxPool2d(_Pool2d):
    """Maximum over each window; the gradient goes to one element per window (the first maximum, row-major)."""

    def forward(self, x):
        self.shape = x.shape
        if self.xp is not np:  # the CuPy branch: one kernel, the argmax kept for backward
            from engine.backend.cuda import kernels
            padded = self.xp.ascontiguousarray(pad2d(x, self.padding, -np.inf))
            self.padded_shape = padded.shape
            out, self.argmax = kernels.max_pool2d_forward(padded, *self.kernel, *self.stride)
            return out
        views, _ = self._offsets(pad2d(x, self.padding, -np.inf))
        row_max, self.col_index = zip(*[_first_max(row) for row in views])  # max along each kernel row, then rows
        out, self.row_index = _first_max(list(row_max))
        return out if out.base is None else out.copy()

    def backward(self, grad):
        if self.xp is not np:
            from engine.backend.cuda import kernels
            grad = self.xp.ascontiguousarray(grad)
            return (crop2d(kernels.max_pool2d_backward(grad, self.argmax, self.padded_shape), self.padding),)
        kw = self.kernel[1]
        per_row = _route(grad, self.row_index, self.kernel[0])
        return (self._scatter([_route(g, index, kw) for g, index in zip(per_row, self.col_index)], grad.dtype),)


class AvgPool2d(_Pool2d):
    """Mean over each window (padding counts as zeros: PyTorch's ``count_include_pad=True``)."""

    def forward(self, x):
        self.shape = x.shape
        if self.xp is not np:  # the CuPy branch: one kernel
            from engine.backend.cuda import kernels
            padded = self.xp.ascontiguousarray(pad2d(x, self.padding))
            self.padded_shape = padded.shape
            return kernels.avg_pool2d_forward(padded, *self.kernel, *self.stride)
        views, _ = self._offsets(pad2d(x, self.padding))
        out = np.zeros(views[0][0].shape, dtype=x.dtype)
        for row in views:
            for view in row:
                out += view
        out *= x.dtype.type(1.0 / (self.kernel[0] * self.kernel[1]))
        return out

    def backward(self, grad):
        if self.xp is not np:
            from engine.backend.cuda import kernels
            grad_padded = kernels.avg_pool2d_backward(self.xp.ascontiguousarray(grad), self.padded_shape, *self.kernel,
                                                      *self.stride)
            return (crop2d(grad_padded, self.padding),)
        share = grad * grad.dtype.type(1.0 / (self.kernel[0] * self.kernel[1]))
        return (self._scatter([[share] * self.kernel[1]] * self.kernel[0], grad.dtype),)
