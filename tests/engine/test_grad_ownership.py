"""No two leaves' ``.grad`` share memory after a backward, on every op family, eager and traced, whatever the
interpreter's reference counting says (``engine.autograd``'s ownership rule does not read it).

Oracles: ``np.shares_memory`` between every two gradients (and with every leaf's value), and the values: a second
backward without ``zero_grad`` must leave exactly twice ``engine.grad``'s gradients (which are always copies), which
an aliased ``.grad`` (added to twice) or a gradient adopted from an op's saved state would break.
"""
from __future__ import annotations

import itertools
import sys
from typing import Callable

import numpy as np
import pytest

import engine
from engine.nn import functional as F

_rng = np.random.default_rng(0)


def _leaf(*shape: int, positive: bool = False) -> engine.Tensor:
    values = _rng.standard_normal(shape).astype(np.float32)
    return engine.tensor(np.abs(values) + 0.5 if positive else values, requires_grad=True)


def _labels() -> engine.Tensor:
    return engine.tensor(np.array([0, 2, 1]))


# family -> (leaves, loss of the leaves)
CASES: dict[str, tuple[Callable[[], list], Callable[..., engine.Tensor]]] = {
    "add": (lambda: [_leaf(3, 4), _leaf(3, 4)], lambda a, b: (a + b).sum()),
    "add broadcast": (lambda: [_leaf(3, 4), _leaf(4)], lambda a, b: (a + b).sum()),
    "sub mul div pow": (lambda: [_leaf(3, 4), _leaf(3, 4, positive=True)],
                        lambda a, b: ((a - b) * b / (b + 1) + b ** 2).sum()),
    "matmul": (lambda: [_leaf(3, 4), _leaf(4, 5)], lambda a, w: (a @ w).sum()),
    "linear": (lambda: [_leaf(3, 4), _leaf(5, 4), _leaf(5)], lambda x, w, b: F.linear(x, w, b).sum()),
    "reductions": (lambda: [_leaf(3, 4), _leaf(3, 4)],
                   lambda a, b: a.sum() + a.mean(axis=0).sum() + b.max(axis=1).sum() + b.min()),
    "shape ops and views": (lambda: [_leaf(3, 4), _leaf(3, 4)],
                            lambda a, b: (a.reshape(4, 3).T * b).sum() + a[1:, ::2].sum()
                            + engine.concat([a, b]).sum() + engine.stack([a, b]).flatten().sum()),
    "activations": (lambda: [_leaf(3, 4), _leaf(3, 4)],
                    lambda a, b: (a.relu() + a.sigmoid() + b.tanh() + b.gelu() + a.leaky_relu()).sum()
                    + a.softmax().sum() + b.log_softmax().sum()),
    "math": (lambda: [_leaf(3, 4, positive=True), _leaf(3, 4)],
             lambda a, b: (a.exp() + a.log() + a.sqrt() + b.abs() + b.clip(-0.5, 0.5)).sum()),
    "where": (lambda: [_leaf(3, 4), _leaf(3, 4)], lambda a, b: engine.where(a > b, a, b).sum()),
    "losses": (lambda: [_leaf(3, 3), _leaf(3, 3)],
               lambda a, b: F.cross_entropy(a, _labels()) + F.mse_loss(a, b)
               + F.binary_cross_entropy_with_logits(b, engine.tensor(np.ones((3, 3), np.float32)))
               + F.nll_loss(b.log_softmax(), _labels())),
    "conv and pool": (lambda: [_leaf(2, 3, 6, 6), _leaf(4, 3, 3, 3), _leaf(4)],
                      lambda x, k, c: F.max_pool2d(F.conv2d(x, k, c, padding=1), 2).sum()
                      + F.avg_pool2d(F.conv2d(x, k), 2).sum()),
    "normalization": (lambda: [_leaf(4, 3, 2, 2), _leaf(3), _leaf(3)],
                      lambda x, g, b: (F.batch_norm(x, None, None, g, b, training=True) ** 2).sum()),
    "a parameter used twice": (lambda: [_leaf(3, 4), _leaf(4, 4)], lambda x, w: ((x @ w) @ w).sum() + w.sum()),
    "the same tensor as both inputs": (lambda: [_leaf(3, 4), _leaf(3, 4)],
                                       lambda a, b: (a * a).sum() + (b + b).sum() + (a @ a.T).sum()),
    "a leaf's gradient is its seed": (lambda: [_leaf(3, 4), _leaf(3, 4)], lambda a, b: (a + b).sum() * 1.0),
}


def _assert_own_memory(leaves: list[engine.Tensor]) -> None:
    grads = [leaf.grad._data for leaf in leaves]
    assert all(g is not None for g in grads)
    for (i, g), (j, h) in itertools.combinations(enumerate(grads), 2):
        assert not np.shares_memory(g, h), f"the .grad of leaves {i} and {j} share memory"
    for i, g in enumerate(grads):
        for j, leaf in enumerate(leaves):
            assert not np.shares_memory(g, leaf._data), f"the .grad of leaf {i} shares memory with leaf {j}'s value"


def _expected(loss_of, leaves) -> list[np.ndarray]:
    return [g.numpy() for g in engine.grad(loss_of(*leaves), leaves)]


@pytest.fixture(params=["reference counts", "borrowed references"])
def interpreter(request, monkeypatch):
    """``borrowed references``: ``sys.getrefcount`` answers as an interpreter that borrows stack references may
    (CPython 3.14): lower than today's counts. Gradient ownership must not depend on it."""
    if request.param == "borrowed references":
        monkeypatch.setattr(sys, "getrefcount", lambda obj: 1)
    return request.param


@pytest.mark.parametrize("family", list(CASES))
def test_eager_leaves_never_share_gradient_memory(family, interpreter) -> None:
    make, loss_of = CASES[family]
    leaves = make()
    expected = _expected(loss_of, leaves)
    loss_of(*leaves).backward()
    _assert_own_memory(leaves)
    for leaf, want in zip(leaves, expected):
        np.testing.assert_allclose(leaf.grad.numpy(), want, rtol=1e-6, atol=1e-6)
    loss_of(*leaves).backward()  # accumulated: an aliased .grad would be added to twice
    _assert_own_memory(leaves)
    for leaf, want in zip(leaves, expected):
        np.testing.assert_allclose(leaf.grad.numpy(), 2 * want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", list(CASES))
def test_traced_leaves_never_share_gradient_memory(family, interpreter) -> None:
    make, loss_of = CASES[family]
    leaves = make()
    expected = _expected(loss_of, leaves)

    @engine.function
    def step() -> engine.Tensor:
        loss = loss_of(*leaves)
        loss.backward()
        return loss

    for call in range(3):  # the trace, then two replays
        for leaf in leaves:
            leaf.grad = None
        step()
        _assert_own_memory(leaves)
        for leaf, want in zip(leaves, expected):
            np.testing.assert_allclose(leaf.grad.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=f"call {call}")
    assert step.trace_count == 1


def test_a_gradient_from_an_ops_saved_state_is_copied_not_adopted() -> None:
    """An op whose backward returns an array it keeps (here: its forward's result) must not hand that array to a
    leaf: a later ``+=`` on the leaf's ``.grad`` would change the op's state (kept by ``retain_graph``)."""

    class Keeps(engine.Function):
        def forward(self, x):
            self.kept = np.ones_like(x)
            return x.copy()

        def backward(self, grad):
            return (self.kept,)

    Keeps.__module__ = "engine.test_ops"  # an engine op: its results are eligible for adoption
    x = _leaf(3)
    out = Keeps()(x).sum()
    out.backward(retain_graph=True)
    kept = out._ctx.parents[0]._ctx.kept
    assert not np.shares_memory(x.grad._data, kept)
    out.backward()
    np.testing.assert_array_equal(kept, np.ones(3, np.float32))  # the op's state, untouched by x.grad += ...
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.ones(3, np.float32))
