"""A reusable op checker: forward against a NumPy reference, gradients against central differences in float64.

``check_op(fn, reference, *arrays)`` runs ``fn`` (engine Tensors in, one Tensor out) on float64 copies of
``arrays`` and compares the result with ``reference`` (NumPy arrays in). It then back-propagates a random
upstream gradient through ``.backward`` *and* through ``engine.grad`` and compares both with the numerical
gradient of ``sum(fn(*inputs) * upstream)``. Finally it runs ``fn`` in float32 and checks that the forward
stays float32 and that every gradient the last op's backward returns has the dtype of its input.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import engine

EPS = 1e-6


def random_array(shape: tuple[int, ...], seed: int = 0, low: float = -2.0, high: float = 2.0,
                 away_from: Sequence[float] = (), margin: float = 0.1) -> np.ndarray:
    """Uniform float64 values in [low, high), each at least ``margin`` from every point in ``away_from``
    (kinks such as 0 for relu/abs, where a central difference straddles two slopes)."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(low, high, size=shape)
    for point in away_from:
        near = np.abs(values - point) < margin
        values = np.where(near, point + np.where(values >= point, margin, -margin) * 2, values)
    return np.asarray(values, dtype=np.float64)


def numerical_gradients(fn: Callable[..., engine.Tensor], arrays: Sequence[np.ndarray], upstream: np.ndarray,
                        wrt: Sequence[int], eps: float = EPS) -> list[np.ndarray]:
    """Central differences of ``sum(fn(*arrays) * upstream)`` with respect to ``arrays[i]`` for i in ``wrt``."""
    grads = []
    for i in wrt:
        grad = np.zeros_like(arrays[i])
        flat = grad.reshape(-1)
        for j in range(arrays[i].size):
            values = []
            for step in (eps, -eps):
                shifted = [a.copy() for a in arrays]
                shifted[i].reshape(-1)[j] += step
                with engine.no_grad():
                    out = fn(*[engine.tensor(a) for a in shifted]).numpy()
                values.append(float(np.sum(out * upstream)))
            flat[j] = (values[0] - values[1]) / (2 * eps)
        grads.append(grad)
    return grads


def check_op(fn: Callable[..., engine.Tensor], reference: Callable[..., np.ndarray] | None, *arrays: Any,
             wrt: Sequence[int] | None = None, atol: float = 1e-7, rtol: float = 1e-6,
             grad_atol: float = 1e-6, grad_rtol: float = 1e-5, seed: int = 1, check_float32: bool = True) -> None:
    """Check ``fn``'s forward against ``reference`` and its gradient against numerical differentiation."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)
    inputs = [engine.tensor(a.copy(), requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*inputs)
    assert out.dtype == np.float64, f"float64 inputs gave a {out.dtype} result"
    if reference is not None:
        expected = np.asarray(reference(*arrays))
        assert out.shape == expected.shape, f"forward shape {out.shape}, reference {expected.shape}"
        np.testing.assert_allclose(out.numpy(), expected, atol=atol, rtol=rtol, err_msg="forward")
    if not wrt:
        return
    upstream = np.random.default_rng(seed).standard_normal(out.shape)
    wanted = [inputs[i] for i in wrt]
    via_grad = engine.grad(out, wanted, engine.tensor(upstream), retain_graph=True)
    assert all(t.grad is None for t in wanted), "engine.grad must leave .grad untouched"
    out.backward(upstream)
    numeric = numerical_gradients(fn, arrays, upstream, wrt)
    for position, (t, g, expected) in enumerate(zip(wanted, via_grad, numeric)):
        assert t.grad is not None, f"input {wrt[position]} got no gradient"
        assert t.grad.shape == t.shape and t.grad.dtype == t.dtype, (t.grad.shape, t.grad.dtype, t.shape)
        np.testing.assert_allclose(t.grad.numpy(), expected, atol=grad_atol, rtol=grad_rtol,
                                   err_msg=f"backward() gradient of input {wrt[position]}")
        np.testing.assert_allclose(g.numpy(), expected, atol=grad_atol, rtol=grad_rtol,
                                   err_msg=f"engine.grad gradient of input {wrt[position]}")
    if check_float32:
        check_float32_dtypes(fn, arrays, wrt)


def check_float32_dtypes(fn: Callable[..., engine.Tensor], arrays: Sequence[np.ndarray], wrt: Sequence[int]) -> None:
    """float32 in → float32 out, and the last op's backward returns gradients in its inputs' dtypes."""
    inputs = [engine.tensor(a.astype(np.float32), requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*inputs)
    assert out.dtype == np.float32, f"float32 inputs gave a {out.dtype} result"
    node = out.grad_fn
    if node is None:
        return
    grads = node.backward(np.ones(out.shape, dtype=np.float32))
    for parent, g, needed in zip(node.parents, grads, node.needs_input_grad):
        if needed and g is not None:
            assert g.dtype == parent.dtype, f"{node.name}.backward returned {g.dtype} for a {parent.dtype} input"
