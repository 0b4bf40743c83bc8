"""ParameterTracker: norms and update ratios against float64 norms computed with NumPy one parameter at a time."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from instrumentation.dynamics.parameters import ParameterTracker


def make(shape, dtype, seed, grad=True):
    rng = np.random.default_rng(seed)
    param = engine.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    if grad:
        param.grad = engine.tensor(rng.standard_normal(shape).astype(dtype))
    return param


def norm(array) -> float:
    return math.sqrt(float(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


@pytest.mark.parametrize("zero_size_at", [None, 0, 2, 4])
def test_norms_and_ratios_match_one_by_one(zero_size_at):
    shapes = [(7, 3), (5,), (2, 2, 3), (11,), (1,)]
    dtypes = [np.float32, np.float64, np.float16, np.float32, np.float32]
    if zero_size_at is not None:
        shapes[zero_size_at] = (0, 3)
    named = [(f"p{i}", make(shape, dtype, i, grad=i != 3)) for i, (shape, dtype) in enumerate(zip(shapes, dtypes))]
    tracker = ParameterTracker(named)
    for step in range(3):
        before = {name: np.array(p.numpy()) for name, p in named}
        tracker.begin(step)
        rng = np.random.default_rng(100 + step)
        for name, p in named:  # the "optimizer": an in-place update of every parameter
            p.numpy()[...] += (rng.standard_normal(p.shape) * 0.01).astype(p.numpy().dtype)
        stats = tracker.end()
        expected_names = tuple(name for name, p in named if p.grad is not None)
        assert stats.step == step and stats.names == expected_names
        params = dict(named)
        for i, name in enumerate(stats.names):
            rel = 2e-3 if params[name].numpy().dtype == np.float16 else 1e-5  # sums in the parameter's precision
            update = params[name].numpy().astype(np.float64) - before[name].astype(np.float64)
            assert stats.grad_norms[i] == pytest.approx(norm(params[name].grad.numpy()), rel=rel, abs=1e-30)
            assert stats.weight_norms[i] == pytest.approx(norm(before[name]), rel=rel, abs=1e-30)
            assert stats.update_norms[i] == pytest.approx(norm(update), rel=rel, abs=1e-30)
            if params[name].size:
                assert stats.update_ratios[i] == pytest.approx(norm(update) / norm(before[name]), rel=rel)
            else:
                assert math.isnan(stats.update_ratios[i])  # 0/0
    assert tracker.end() is None  # no begin


def test_layout_follows_parameters_gaining_and_losing_gradients():
    a, b = make((4,), np.float32, 0), make((3,), np.float32, 1, grad=False)
    tracker = ParameterTracker([("a", a), ("b", b)])
    tracker.begin(0)
    assert tracker.end().names == ("a",)
    b.grad = engine.tensor(np.full(3, 2.0, np.float32))
    tracker.begin(1)
    stats = tracker.end()
    assert stats.names == ("a", "b") and stats.grad_norms[1] == pytest.approx(math.sqrt(12.0))
    a.grad = None  # a frozen parameter: the layout follows again
    tracker.begin(2)
    b.numpy()[...] += 1.0
    stats = tracker.end()
    assert stats.names == ("b",) and stats.update_norms[0] == pytest.approx(math.sqrt(3.0))


def test_nonfinite_values_give_nonfinite_norms():
    p = make((5,), np.float32, 0)
    tracker = ParameterTracker([("p", p)])
    tracker.begin(0)
    p.numpy()[2] = np.inf
    stats = tracker.end()
    assert math.isinf(stats.update_norms[0]) and math.isinf(stats.update_ratios[0])
    p.numpy()[2] = 1.0
    p.grad.numpy()[0] = np.nan
    tracker.begin(1)
    p.numpy()[1] = np.nan
    stats = tracker.end()
    assert math.isnan(stats.grad_norms[0]) and math.isnan(stats.update_norms[0])
