"""Reductions (one, several, all axes; keepdims), softmax and log-softmax: forward and numerical gradients."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from gradcheck import check_op, random_array

AXES = [None, 0, 1, -1, (0, 2), (2, 0), (0, 1, 2), (-1, 0), ()]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reductions(name, axis, keepdims):
    x = random_array((2, 3, 4), seed=21)  # distinct values: max/min have one arg-extremum per slice
    reference = getattr(np, name)
    check_op(lambda t: getattr(t, name)(axis=axis, keepdims=keepdims),
             lambda a: reference(a, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reduction_of_0d_tensor_accepts_axis_0(name):
    x = engine.tensor(2.5, requires_grad=True)
    y = getattr(x, name)(axis=0)
    assert y.shape == () and y.item() == 2.5
    y.backward()
    assert x.grad.item() == 1.0


@pytest.mark.parametrize("name,reduce", [("max", np.max), ("min", np.min)])
def test_max_min_ties_share_gradient_like_torch_amax(name, reduce):
    values = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    x = engine.tensor(values, requires_grad=True)
    getattr(x, name)(axis=(0, 1)).backward()
    mask = values == reduce(values)
    np.testing.assert_allclose(x.grad.numpy(), mask / mask.sum())
    torch = pytest.importorskip("torch")
    t = torch.tensor(values, requires_grad=True)
    getattr(torch, "a" + name)(t, dim=(0, 1)).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_mean_keeps_float32():
    x = engine.tensor(np.ones((3, 4), dtype=np.float32), requires_grad=True)
    x.mean(axis=1).sum().backward()
    assert x.mean().dtype == np.float32 and x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 0.25))


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name,reference", [("softmax", _np_softmax), ("log_softmax", _np_log_softmax)])
def test_softmax_family(name, reference, axis):
    check_op(lambda t: getattr(t, name)(axis), lambda a: reference(a, axis), random_array((3, 4, 2), seed=22))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_softmax_is_stable_for_huge_logits(dtype):
    logits = np.array([[1e30, 0.0, -1e30], [1e4, 1e4 + 1.0, 1e4 - 1.0], [-1e4, -1e4, -1e4]], dtype=dtype)
    x = engine.tensor(logits, requires_grad=True)
    with np.errstate(over="raise", invalid="raise"):
        log_probs = x.log_softmax(axis=1)
        probs = x.softmax(axis=1)
    assert np.isfinite(log_probs.numpy()).all() and np.isfinite(probs.numpy()).all()
    np.testing.assert_allclose(log_probs.numpy()[1], np.array([-1.4076059, -0.4076059, -2.4076059]), rtol=1e-5)
    np.testing.assert_allclose(log_probs.numpy()[2], np.log(np.full(3, 1 / 3)), rtol=1e-6)
    np.testing.assert_allclose(probs.numpy()[0], [1.0, 0.0, 0.0])
    log_probs[:, 0].sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy().sum(axis=1), 0.0, atol=1e-6)


def test_log_softmax_matches_torch():
    torch = pytest.importorskip("torch")
    logits = random_array((4, 5), seed=23, low=-30, high=30)
    upstream = random_array((4, 5), seed=24)
    x = engine.tensor(logits, requires_grad=True)
    x.log_softmax(axis=-1).backward(upstream)
    t = torch.tensor(logits, requires_grad=True)
    torch.log_softmax(t, dim=-1).backward(torch.tensor(upstream))
    np.testing.assert_allclose(x.log_softmax(-1).numpy(), torch.log_softmax(t, -1).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_argmax_has_no_gradient():
    x = engine.tensor(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 1.0]]), requires_grad=True)
    np.testing.assert_array_equal(x.argmax(axis=1).numpy(), [1, 0])
    assert not x.argmax().requires_grad and x.argmax().item() == 3
