"""Losses against torch (float64) — cross_entropy in every mode, nll, mse, bce-with-logits — plus numerical
gradients and the error messages for bad targets."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import engine
from engine.nn import functional as F
from nn_oracle import assert_close, check_numeric, compare_with_torch, rand

TF = torch.nn.functional


def _compare(engine_fn, torch_fn, x):
    compare_with_torch(engine_fn, torch_fn, [x])


CE_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(label_smoothing=0.1),
    dict(label_smoothing=0.2, reduction="none"),
    dict(weight=np.array([0.5, 2.0, 1.0, 0.25])),
    dict(weight=np.array([0.5, 2.0, 1.0, 0.25]), label_smoothing=0.3),
    dict(ignore_index=2),
    dict(ignore_index=2, weight=np.array([0.5, 2.0, 1.0, 0.25]), label_smoothing=0.1),
    dict(ignore_index=1, reduction="none", label_smoothing=0.05),
    dict(ignore_index=1, reduction="sum", weight=np.array([0.5, 2.0, 1.0, 0.25])),
]


@pytest.mark.parametrize("kwargs", CE_CASES, ids=str)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 2, 3), (4,)])
def test_cross_entropy_matches_torch(kwargs, shape):
    x = rand(shape, seed=1, low=-4, high=4)
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    target = np.random.default_rng(2).integers(0, 4, size=target_shape)
    if target.size > 1:
        target.reshape(-1)[:2] = [1, 2]  # make sure ignore_index is hit
    elif "ignore_index" in kwargs:
        return
    torch_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    _compare(lambda t: F.cross_entropy(t, target, **kwargs),
             lambda t: TF.cross_entropy(t, torch.tensor(target), **torch_kwargs), x)


@pytest.mark.parametrize("kwargs", [dict(), dict(reduction="none"), dict(label_smoothing=0.2, reduction="sum"),
                                    dict(weight=np.array([1.0, 3.0, 0.5]))], ids=str)
def test_cross_entropy_with_probability_targets(kwargs):
    x = rand((5, 3), seed=3, low=-3, high=3)
    probs = np.random.default_rng(4).dirichlet(np.ones(3), size=5)
    torch_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    _compare(lambda t: F.cross_entropy(t, probs, **kwargs),
             lambda t: TF.cross_entropy(t, torch.tensor(probs), **torch_kwargs), x)


def test_cross_entropy_stable_for_huge_logits_and_float32():
    x = np.array([[1000.0, -1000.0, 0.0], [-500.0, 500.0, 499.0]], dtype=np.float32)
    out = F.cross_entropy(engine.tensor(x, requires_grad=True), np.array([0, 2]))
    assert out.dtype == np.float32
    expected = TF.cross_entropy(torch.tensor(x), torch.tensor([0, 2]))
    assert np.isfinite(out.item()) and abs(out.item() - expected.item()) < 1e-4


@pytest.mark.parametrize("kwargs", [dict(), dict(label_smoothing=0.2, weight=np.array([0.3, 1.0, 2.0])),
                                    dict(ignore_index=0, reduction="sum")], ids=str)
def test_cross_entropy_numerical_gradient(kwargs):
    target = np.array([0, 2, 1, 0])
    check_numeric(lambda t: F.cross_entropy(t, target, **kwargs), [rand((4, 3), seed=5, low=-2, high=2)])


def test_cross_entropy_errors():
    x = engine.tensor(rand((3, 4)))
    with pytest.raises(IndexError, match=r"\[0, 4\).*\[4\]"):
        F.cross_entropy(x, np.array([0, 4, 1]))
    with pytest.raises(IndexError, match=r"\[-1\]"):
        F.cross_entropy(x, np.array([0, -1, 1]))
    with pytest.raises(TypeError, match="integer class labels.*float64"):
        F.cross_entropy(x, np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"target of shape \(2,\).*expected target shape \(3,\)"):
        F.cross_entropy(x, np.array([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, np.array([0, 1, 1]), reduction="avg")
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        F.cross_entropy(x, np.array([0, 1, 1]), weight=np.ones(3))


@pytest.mark.parametrize("kwargs", [dict(), dict(reduction="sum"), dict(reduction="none"),
                                    dict(weight=np.array([0.5, 2.0, 1.0])), dict(ignore_index=1)], ids=str)
def test_nll_loss_matches_torch(kwargs):
    x = np.log(np.random.default_rng(6).dirichlet(np.ones(3), size=5))
    target = np.array([0, 1, 2, 1, 0])
    torch_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    _compare(lambda t: F.nll_loss(t, target, **kwargs),
             lambda t: TF.nll_loss(t, torch.tensor(target), **torch_kwargs), x)


def test_log_softmax_then_nll_equals_cross_entropy():
    x, target = rand((4, 5), seed=8), np.array([4, 0, 2, 2])
    fused = F.cross_entropy(engine.tensor(x), target)
    composed = F.nll_loss(F.log_softmax(engine.tensor(x), dim=1), target)
    assert_close(fused, composed.numpy())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target_shape", [(3, 4), (4,)])
def test_mse_loss_matches_torch_including_target_grad(reduction, target_shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch warns about broadcasting targets
        compare_with_torch(lambda x, y: F.mse_loss(x, y, reduction=reduction),
                           lambda x, y: TF.mse_loss(x, y, reduction=reduction),
                           [rand((3, 4), seed=1), rand(target_shape, seed=2)])


@pytest.mark.parametrize("kwargs", [dict(), dict(reduction="sum"), dict(reduction="none"),
                                    dict(weight=np.array([0.5, 2.0, 1.0])), dict(pos_weight=np.array([3.0, 0.5, 1.0])),
                                    dict(pos_weight=np.array([2.0, 1.0, 0.1]), weight=np.array([[1.0], [0.0],
                                                                                                 [2.0], [0.5]]))],
                         ids=str)
def test_bce_with_logits_matches_torch(kwargs):
    x = rand((4, 3), seed=1, low=-30, high=30)
    t = np.random.default_rng(2).uniform(0, 1, size=(4, 3))
    torch_kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    compare_with_torch(lambda x, t: F.binary_cross_entropy_with_logits(x, t, **kwargs),
                       lambda x, t: TF.binary_cross_entropy_with_logits(x, t, **torch_kwargs), [x, t])


def test_bce_with_logits_extreme_logits_finite():
    x = engine.tensor(np.array([1e4, -1e4, 0.0], dtype=np.float32), requires_grad=True)
    out = F.binary_cross_entropy_with_logits(x, np.array([0.0, 1.0, 1.0], dtype=np.float32))
    out.backward()
    assert np.isfinite(out.item()) and np.all(np.isfinite(x.grad.numpy()))
    with pytest.raises(ValueError, match=r"target shape \(2,\) must equal input shape \(3,\)"):
        F.binary_cross_entropy_with_logits(x, np.zeros(2, dtype=np.float32))
