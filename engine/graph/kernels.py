"""Replay kernels: callables for nodes whose op (or optimizer) re-derives on every eager call what the trace has
fixed.

``for_node(node)`` returns a kernel for the node, or None to replay the node's own callable. A kernel computes
what the op computes with the same NumPy calls in the same order (so the same bits) and sets the state the op's
backward reads, but decides the op's static branches (reduction, class weights, label smoothing, input rank) once,
when the replay is compiled; whatever it cannot decide then (device, label range, the optimizer's hyper-parameters)
it checks on every call and hands the call to the op or optimizer itself when the check fails. Kernels run on NumPy
arrays only: CrossEntropy forward and backward, and the SGD (momentum) update.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from engine import hooks as _hooks

_max, _add, _exp, _log, _subtract = np.maximum.reduce, np.add.reduce, np.exp, np.log, np.subtract


def for_node(node: Any) -> Callable[..., Any] | None:
    op = node.instance if node.kind in ("forward", "backward") else getattr(node.run, "optimizer", None)
    if op is None:
        return None
    make = _KERNELS.get((type(op).__name__, node.kind))
    return make(node, op) if make is not None else None


def _plain_cross_entropy(op: Any) -> bool:
    """Labels, no class weights, no smoothing, a reduced loss, an ignore_index outside the class range (so that
    labels all in range means none is ignored), on (N, C) logits."""
    from engine.ops.loss import CrossEntropy
    shape = getattr(op, "shape", None)
    return (type(op) is CrossEntropy and op.weight is None and not op.smoothing and op.reduction in ("mean", "sum")
            and shape is not None and len(shape) == 2 and shape[0] > 0
            and not 0 <= op.ignore_index < shape[1])


def _cross_entropy_forward(node: Any, op: Any) -> Callable[..., Any] | None:
    """``CrossEntropy.forward`` (labels bound from the graph input) for ``_plain_cross_entropy`` ops: one reduction
    checks the labels (all in [0, C), as unsigned integers); a batch that fails it goes to the op, which ignores
    or refuses labels as eager does."""
    if not _plain_cross_entropy(op) or len(node.inputs) != 2 or ("bound", ("target",)) not in node.attrs:
        return None
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


def _cross_entropy_backward(node: Any, op: Any) -> Callable[..., Any] | None:
    """``CrossEntropy.backward`` for ``_plain_cross_entropy`` ops whose forward left no per-row weights."""
    if not _plain_cross_entropy(op):
        return None
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


def _sgd_step(node: Any, optimizer: Any) -> Callable[..., Any] | None:
    """``SGD.step()`` (the node's update, then ``mark_step_end``) when every group has momentum and no weight decay,
    dampening or Nesterov, and every parameter with a gradient has its momentum buffer and lives in host memory (all
    checked per call, before anything is updated; else the optimizer's own update runs): ``SGD._update_group``'s
    NumPy calls on the same arrays, without its per-parameter branches. Observed steps take the optimizer's path."""
    from engine.optim.sgd import SGD
    if type(optimizer) is not SGD:
        return None
    generic, groups, state, scratch = node.run, optimizer.param_groups, optimizer.state, optimizer._scratch_for

    def run(*params: Any) -> None:
        if _hooks.optimizer_observed:
            return generic(*params)
        for group in groups:
            if group["weight_decay"] != 0 or group["dampening"] != 0 or group["nesterov"] or group["momentum"] == 0:
                return generic(*params)
            for p in group["params"]:
                if p.grad is None:
                    continue
                buffer = state.get(p, _EMPTY).get("momentum_buffer")
                if buffer is None or type(buffer._data) is not np.ndarray or type(p._data) is not np.ndarray:
                    return generic(*params)
        for group in groups:
            momentum, step = group["momentum"], -group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                data, buffer, (_, product) = p._data, state[p]["momentum_buffer"]._data, scratch(p)
                _multiply(buffer, momentum, out=buffer)
                _add_to(buffer, p.grad._data, out=buffer)
                _multiply(buffer, step, out=product)
                _add_to(data, product, out=data)
        _hooks.mark_step_end()
    return run


_EMPTY: dict = {}  # the state of a parameter the optimizer has not seen (read only)
_multiply, _add_to = np.multiply, np.add
_KERNELS = {("CrossEntropy", "forward"): _cross_entropy_forward, ("CrossEntropy", "backward"): _cross_entropy_backward,
            ("SGD", "effect"): _sgd_step}
