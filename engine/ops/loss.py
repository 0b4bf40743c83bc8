"""Fused losses: cross-entropy (log-softmax + pick), NLL, MSE and binary cross-entropy with logits."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from engine.backend import get_array_module
from engine.op import Function
from engine.ops._util import broadcast_shape, elementwise_nbytes, errstate, result_dtype, shape_nbytes, unbroadcast

REDUCTIONS = ("mean", "sum", "none")


def _rows(x: np.ndarray) -> np.ndarray:
    """Class scores (N, C, d1, ...) or (C,) as a (rows, C) matrix, rows in the order of target.reshape(-1)."""
    if x.ndim == 1:
        return x[None]
    if x.ndim == 2:
        return x
    return get_array_module(x).moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if len(shape) <= 2:
        return g.reshape(shape)
    return get_array_module(g).moveaxis(g.reshape((shape[0],) + shape[2:] + (shape[1],)), -1, 1)


class _Labelled(Function):
    """Shared by CrossEntropy and NLLLoss: integer labels, ignore_index, class weights and the reduction."""

    def __init__(self, target: np.ndarray, weight: np.ndarray | None, reduction: str, ignore_index: int) -> None:
        self.target, self.weight, self.reduction, self.ignore_index = target, weight, reduction, ignore_index

    def _labels(self, num_classes: int, dtype: np.dtype) -> None:
        """Sets rows, labels (ignored ones replaced by 0), valid (None when all are) and per-row weights."""
        xp = self.xp
        labels = self.target.reshape(-1)
        valid = labels != self.ignore_index
        if valid.all():
            valid = None
        else:
            labels = xp.where(valid, labels, 0)
        if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
            bad = labels[(labels < 0) | (labels >= num_classes)]
            raise IndexError(f"{self.name}: target labels must lie in [0, {num_classes}) (or equal ignore_index="
                             f"{self.ignore_index}); got {bad.size} out of range, e.g. {bad[:5].tolist()}")
        self.labels, self.valid, self.index = labels, valid, xp.arange(labels.size)
        row_weight = None if self.weight is None else self.weight[labels].astype(dtype, copy=False)
        if valid is not None:
            row_weight = valid.astype(dtype) if row_weight is None else row_weight * valid
        self.row_weight = row_weight  # None means every row has weight 1

    def output_nbytes(self, x):
        return (self.target.size if self.reduction == "none" else 1) * x.dtype.itemsize

    def _reduce(self, per_row: np.ndarray, dtype: np.dtype) -> np.ndarray:
        if self.reduction == "none":
            return per_row.reshape(self.target.shape).astype(dtype, copy=False)
        xp = self.xp
        total = per_row.sum(dtype=dtype)
        if self.reduction == "sum":
            return xp.asarray(total, dtype=dtype)
        self.denominator = per_row.size if self.row_weight is None else self.row_weight.sum(dtype=np.float64)
        with errstate(xp, invalid="ignore", divide="ignore"):
            return xp.asarray(total / self.denominator, dtype=dtype)

    def _row_scale(self, grad: np.ndarray, dtype: np.dtype) -> Any:
        """d(output)/d(per-row loss) times the incoming gradient: a scalar, or a (rows,) column for 'none'."""
        if self.reduction == "none":
            return grad.reshape(-1).astype(dtype, copy=False)
        if self.xp is not np:  # a 0-d device array: no device-to-host read
            return (grad if self.reduction == "sum" else grad / self.denominator).astype(dtype)
        scale = grad.item() if self.reduction == "sum" else grad.item() / self.denominator
        return dtype.type(scale)


class CrossEntropy(_Labelled):
    """Cross-entropy from logits: stable log-softmax and pick in forward; softmax − one-hot in backward.

    With class weights w and label smoothing ε, row i contributes (1−ε)·w[y_i]·(−log p[y_i]) +
    (ε/C)·Σ_c w_c·(−log p_c); 'mean' divides by Σ w[y_i] over non-ignored rows (as PyTorch).
    """

    cuda_kernel = "softmax_xent"  # kernels/softmax_xent.cu: the CuPy branch without label smoothing

    def __init__(self, target: np.ndarray, weight: np.ndarray | None = None, reduction: str = "mean",
                 ignore_index: int = -100, label_smoothing: float = 0.0) -> None:
        super().__init__(target, weight, reduction, ignore_index)
        self.smoothing = float(label_smoothing)

    def forward(self, x):
        z = _rows(x)
        classes = z.shape[1]
        self.shape, dtype = x.shape, x.dtype
        self._labels(classes, dtype)
        if self.xp is not np and not self.smoothing:
            return self._forward_fused(z, dtype)
        xp = self.xp
        shifted = z - z.max(axis=1, keepdims=True)
        p = xp.exp(shifted)
        total = p.sum(axis=1)
        log_total = xp.log(total)
        p /= total[:, None]
        self.p = p
        per_row = log_total - shifted[self.index, self.labels]  # −log p[y]
        if self.row_weight is not None:
            per_row *= self.row_weight
        if self.smoothing:
            w = self.weight
            # Σ_c w_c·(−log p_c) = log Σe·Σw − shifted·w
            smooth = (log_total * (classes if w is None else w.sum()) -
                      (shifted.sum(axis=1) if w is None else shifted @ w.astype(dtype)))
            if self.valid is not None:
                smooth *= self.valid
            per_row = (1 - self.smoothing) * per_row + (self.smoothing / classes) * smooth
        return self._reduce(per_row, dtype)

    def _forward_fused(self, z: Any, dtype: np.dtype) -> Any:
        """The CuPy branch without label smoothing: one fused softmax-cross-entropy kernel."""
        from engine.backend.cuda import kernels
        xp = self.xp
        self.raw_labels = xp.ascontiguousarray(self.target.reshape(-1), dtype=xp.int64)
        per_row, self.p = kernels.softmax_cross_entropy_forward(xp.ascontiguousarray(z), self.raw_labels,
                                                                int(self.ignore_index))
        if self.weight is not None:  # row_weight holds the class weight (and 0 on ignored rows)
            per_row = per_row * self.row_weight
        return self._reduce(per_row, dtype)

    def backward(self, grad):
        p, dtype = self.p, self.p.dtype
        scale = self._row_scale(grad, dtype)
        eps, classes = self.smoothing, p.shape[1]
        hard = scale if self.row_weight is None else scale * self.row_weight
        if self.xp is not np and not eps:
            from engine.backend.cuda import kernels
            row_scale = self.xp.ascontiguousarray(self.xp.broadcast_to(hard, (p.shape[0],)), dtype=dtype)
            g = kernels.softmax_cross_entropy_backward(p, self.raw_labels, row_scale, int(self.ignore_index))
            return (_unrows(g, self.shape),)
        if eps:
            w = self.xp.ones(classes, dtype) if self.weight is None else self.weight.astype(dtype)
            smooth = scale if self.valid is None else scale * self.valid
            row_sum = (1 - eps) * hard + (eps / classes) * w.sum() * smooth
            g = p * (row_sum[:, None] if np.ndim(row_sum) else row_sum)
            g -= (eps / classes) * w * (smooth[:, None] if np.ndim(smooth) else smooth)
            hard = (1 - eps) * hard
        else:
            g = p * (hard[:, None] if np.ndim(hard) else hard)
        g[self.index, self.labels] -= hard
        return (_unrows(g, self.shape),)

    def replay_kernel(self, node: Any) -> Callable[..., Any] | None:
        """For a traced graph, when this op is plain (labels, no class weights, no smoothing, a reduced loss, an
        ``ignore_index`` outside the class range, so that labels all in range means none is ignored, on (N, C)
        logits): forward (labels bound from the graph input) and backward with those branches decided once."""
        shape = getattr(self, "shape", None)
        plain = (type(self) is CrossEntropy and self.weight is None and not self.smoothing
                 and self.reduction in ("mean", "sum") and shape is not None and len(shape) == 2 and shape[0] > 0
                 and not 0 <= self.ignore_index < shape[1])
        if plain and node.kind == "forward" and len(node.inputs) == 2 and ("bound", ("target",)) in node.attrs:
            return _replay_forward(self)
        return _replay_backward(self) if plain and node.kind == "backward" else None


_max, _add, _exp, _log, _subtract = np.maximum.reduce, np.add.reduce, np.exp, np.log, np.subtract


def _replay_forward(op: CrossEntropy) -> Callable[..., Any]:
    """``CrossEntropy.forward`` on host arrays, the same NumPy calls in the same order: one reduction checks the labels
    (all in [0, C), as unsigned integers); a batch that fails it, or logits elsewhere, goes to the op, which ignores
    or refuses labels as eager does."""
    classes, rows = op.shape[1], op.shape[0]
    index = np.arange(rows)
    index.flags.writeable = False
    mean, forward = op.reduction == "mean", op.forward

    def run(x: Any, target: Any) -> Any:
        op.target = target
        labels = target.reshape(-1)
        if (type(x) is not np.ndarray or x.ndim != 2 or labels.size != rows or labels.dtype.kind not in "iu"
                or _max(labels.view(labels.dtype.str.replace("i", "u"))) >= classes):
            return forward(x)
        dtype = x.dtype
        op.shape, op.labels, op.valid, op.index, op.row_weight = x.shape, labels, None, index, None
        # NOTE: the row maxima over a transposed copy: a reduction along the long axis, twice as fast on (N, C)
        # logits; a maximum does not depend on the order it is taken in, so the bits are eager's
        shifted = _subtract(x, _max(x.T.copy(), axis=0)[:, None])
        p = _exp(shifted)
        total = _add(p, axis=1)
        log_total = _log(total)
        p /= total[:, None]
        op.p = p
        loss = _add(log_total - shifted[index, labels], dtype=dtype)
        if mean:
            op.denominator = rows
            loss = loss / rows
        return np.asarray(loss, dtype=dtype)
    return run


def _replay_backward(op: CrossEntropy) -> Callable[..., Any]:
    """``CrossEntropy.backward`` when the replayed forward left host probabilities and no per-row weights."""
    backward, mean = op.backward, op.reduction == "mean"

    def run(grad: Any) -> Any:
        p = op.p
        if type(p) is not np.ndarray or op.row_weight is not None:
            return backward(grad)
        scale = p.dtype.type(grad.item() / op.denominator if mean else grad.item())
        g = p * scale
        g[op.index, op.labels] -= scale
        return (g,)
    return run


class SoftCrossEntropy(Function):
    """Cross-entropy against class probabilities (a float target of the input's shape), as PyTorch."""

    def __init__(self, target: np.ndarray, weight: np.ndarray | None, reduction: str, label_smoothing: float) -> None:
        self.target, self.weight, self.reduction, self.smoothing = target, weight, reduction, float(label_smoothing)

    def forward(self, x):
        z, t = _rows(x), _rows(self.target).astype(x.dtype, copy=False)
        classes = z.shape[1]
        self.shape = x.shape
        if self.smoothing:
            t = t * (1 - self.smoothing) + self.smoothing / classes
        a = t if self.weight is None else t * self.weight.astype(x.dtype)
        shifted = z - z.max(axis=1, keepdims=True)
        xp = self.xp
        p = xp.exp(shifted)
        total = p.sum(axis=1)
        p /= total[:, None]
        self.p, self.a = p, a
        per_row = xp.log(total) * a.sum(axis=1) - (a * shifted).sum(axis=1)
        if self.reduction == "none":
            return per_row.reshape(self.shape[:1] + self.shape[2:] if len(self.shape) > 1 else ())
        total_loss = per_row.sum(dtype=x.dtype)
        return xp.asarray(total_loss / (per_row.size if self.reduction == "mean" else 1), dtype=x.dtype)

    def output_nbytes(self, x):
        rows = x.size // x.shape[1] if x.ndim > 1 and x.shape[1] else 1
        return (rows if self.reduction == "none" else 1) * x.dtype.itemsize

    def backward(self, grad):
        p, a = self.p, self.a
        if self.reduction == "none":
            scale = grad.reshape(-1, 1).astype(p.dtype, copy=False)
        elif self.xp is not np:  # a 0-d device array: no device-to-host read
            scale = (grad / (p.shape[0] if self.reduction == "mean" else 1)).astype(p.dtype)
        else:
            scale = p.dtype.type(grad.item() / (p.shape[0] if self.reduction == "mean" else 1))
        g = (p * a.sum(axis=1, keepdims=True) - a) * scale
        return (_unrows(g, self.shape),)


class NLLLoss(_Labelled):
    """Negative log-likelihood of log-probabilities: −w[y]·x[y] per row."""

    def forward(self, x):
        z = _rows(x)
        self.shape, dtype = x.shape, x.dtype
        self._labels(z.shape[1], dtype)
        per_row = -z[self.index, self.labels]
        if self.row_weight is not None:
            per_row = per_row * self.row_weight
        return self._reduce(per_row, dtype)

    def backward(self, grad):
        dtype = grad.dtype
        scale = self._row_scale(grad, dtype)
        hard = scale if self.row_weight is None else scale * self.row_weight
        rows = self.labels.size
        g = self.xp.zeros((rows, int(np.prod(self.shape)) // max(rows, 1)), dtype=dtype)
        g[self.index, self.labels] = -hard
        return (_unrows(g, self.shape),)


class MSELoss(Function):
    def __init__(self, reduction: str = "mean") -> None:
        self.reduction = reduction

    def forward(self, x, target):
        self.diff = x - target
        self.shapes = x.shape, target.shape
        squared = self.diff * self.diff
        if self.reduction == "none":
            return squared
        total = squared.sum()
        return self.xp.asarray(total / squared.size if self.reduction == "mean" else total, dtype=squared.dtype)

    def output_nbytes(self, x, target):
        return elementwise_nbytes(self, x, target) if self.reduction == "none" else result_dtype(x, target).itemsize

    def backward(self, grad):
        d = self.diff
        factor = 2.0 / d.size if self.reduction == "mean" else 2.0
        g = d * (grad * d.dtype.type(factor))
        gx = unbroadcast(g, self.shapes[0]) if self.needs_input_grad[0] else None
        gt = -unbroadcast(g, self.shapes[1]) if self.needs_input_grad[1] else None
        return gx, gt


class BCEWithLogits(Function):
    """Binary cross-entropy on logits, stable for any magnitude: (1−t)·x + l·softplus(−x), l = 1 + (pw−1)·t."""

    def __init__(self, weight: np.ndarray | None, pos_weight: np.ndarray | None, reduction: str) -> None:
        self.weight, self.pos_weight, self.reduction = weight, pos_weight, reduction

    def forward(self, x, t):
        self.x, self.t = x, t
        xp = self.xp
        self.softplus_neg = xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(-x, 0)
        self.log_weight = None if self.pos_weight is None else (self.pos_weight - 1) * t + 1
        sp = self.softplus_neg if self.log_weight is None else self.log_weight * self.softplus_neg
        loss = (1 - t) * x + sp
        if self.weight is not None:
            loss = loss * self.weight
        self.loss_shape = loss.shape
        if self.reduction == "none":
            return loss
        total = loss.sum()
        return xp.asarray(total / loss.size if self.reduction == "mean" else total, dtype=loss.dtype)

    def output_nbytes(self, x, t):
        operands = [a for a in (x, t, self.weight, self.pos_weight) if a is not None]
        dtype = result_dtype(*operands)
        if self.reduction != "none":
            return dtype.itemsize
        return shape_nbytes(broadcast_shape(*[a.shape for a in operands]), dtype)

    def backward(self, grad):
        x, t = self.x, self.t
        if self.reduction == "mean":
            grad = grad / self.x.dtype.type(int(np.prod(self.loss_shape)))
        if self.weight is not None:
            grad = grad * self.weight
        gx = gt = None
        if self.needs_input_grad[0]:
            xp = self.xp
            z = xp.exp(-xp.abs(x))
            sigmoid_neg = xp.where(x >= 0, z / (1 + z), 1 / (1 + z))
            lw = 1 if self.log_weight is None else self.log_weight
            gx = unbroadcast(grad * ((1 - t) - lw * sigmoid_neg), x.shape)
        if self.needs_input_grad[1]:
            dt = -x if self.pos_weight is None else -x + (self.pos_weight - 1) * self.softplus_neg
            gt = unbroadcast(grad * dt, t.shape)
        return gx, gt
