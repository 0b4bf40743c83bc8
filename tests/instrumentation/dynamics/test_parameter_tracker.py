"""ParameterTracker: every statistic against float64 NumPy computed one parameter at a time — mixed float16/32/64,
zero-size and frozen parameters, NaN/±Inf in weights and gradients, and the update of real optimizers."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from instrumentation.dynamics.parameters import ParameterTracker


def make(shape, dtype, seed, grad=True, requires_grad=True):
    rng = np.random.default_rng(seed)
    param = engine.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=requires_grad)
    if grad:
        param.grad = engine.tensor(rng.standard_normal(shape).astype(dtype))
    return param


def norm(array) -> float:
    return math.sqrt(float(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


def finite_range(array) -> tuple[float, float]:
    wide = np.asarray(array, dtype=np.float64)
    finite = wide[np.isfinite(wide)]
    return (float(finite.min()), float(finite.max())) if finite.size else (math.nan, math.nan)


def same(got: float, expected: float, rel: float) -> bool:
    if math.isnan(expected):
        return math.isnan(got)
    return got == pytest.approx(expected, rel=rel, abs=0)


def check_against_numpy(stats, params: dict, before: dict, extremes: bool = True) -> None:
    """Every field of ``stats`` against float64 NumPy on each parameter alone (``before``: copies of w before);
    without ``extremes`` min/max are NaN."""
    for i, name in enumerate(stats.names):
        p = params[name]
        w0, w1, g = before[name], p.numpy(), p.grad.numpy()
        rel = 1e-5 if w0.dtype != np.float16 else 1e-4  # float16 is reduced in float32
        with np.errstate(invalid="ignore"):  # inf - inf
            update = w1.astype(np.float64) - w0.astype(np.float64)
        expected = {"grad_norms": norm(g), "weight_norms": norm(w0), "update_norms": norm(update),
                    "grad_min": finite_range(g)[0], "grad_max": finite_range(g)[1],
                    "weight_min": finite_range(w0)[0], "weight_max": finite_range(w0)[1],
                    "grad_nan_counts": int(np.isnan(g).sum()), "grad_inf_counts": int(np.isinf(g).sum()),
                    "weight_nan_counts": int(np.isnan(w0).sum()), "weight_inf_counts": int(np.isinf(w0).sum())}
        ratio = expected["update_norms"] / expected["weight_norms"] if expected["weight_norms"] else (
            math.nan if expected["update_norms"] == 0 or math.isnan(expected["update_norms"]) else math.inf)
        expected["update_ratios"] = ratio
        if not extremes:
            expected.update(grad_min=math.nan, grad_max=math.nan, weight_min=math.nan, weight_max=math.nan)
        for key, value in expected.items():
            got = getattr(stats, key)[i]
            assert same(got, value, rel), (name, key, got, value)


def step_with(tracker, named, step, update) -> object:
    """begin, ``update`` (the optimizer), end; checks the result against NumPy and returns it."""
    before = {name: np.array(p.numpy()) for name, p in named}
    tracker.begin(step)
    update()
    stats = tracker.end()
    assert stats.step == step
    assert stats.names == tuple(name for name, p in named if p.grad is not None)
    check_against_numpy(stats, dict(named), before, tracker.extremes)
    return stats


def random_update(named, seed):
    def update():
        rng = np.random.default_rng(seed)
        for _, p in named:
            p.numpy()[...] += (rng.standard_normal(p.shape) * 0.01).astype(p.numpy().dtype)
    return update


@pytest.mark.parametrize("extremes", [True, False])
@pytest.mark.parametrize("zero_size_at", [None, 0, 2, 4])
def test_mixed_dtypes_zero_size_and_frozen_parameters_match_numpy(zero_size_at, extremes):
    shapes = [(7, 3), (5,), (2, 2, 3), (11,), (1,), (4, 4), (6,), (3, 1)]
    dtypes = [np.float32, np.float64, np.float16, np.float32, np.float32, np.float16, np.float64, np.float32]
    if zero_size_at is not None:
        shapes[zero_size_at] = (0, 3)
    named = [(f"p{i}", make(shape, dtype, i, grad=i not in (3, 6), requires_grad=i != 6))
             for i, (shape, dtype) in enumerate(zip(shapes, dtypes))]  # p3: no gradient; p6: requires_grad False
    tracker = ParameterTracker(named, extremes=extremes)
    for step in range(3):
        stats = step_with(tracker, named, step, random_update(named, 100 + step))
        assert "p3" not in stats.names and "p6" not in stats.names
        if zero_size_at is not None:
            i = stats.names.index(f"p{zero_size_at}")
            assert stats.grad_norms[i] == 0 and math.isnan(stats.update_ratios[i]) and math.isnan(stats.grad_min[i])
    assert tracker.end() is None  # no begin


@pytest.mark.parametrize("extremes", [True, False])
def test_nonfinite_weights_and_gradients_are_counted_per_parameter(extremes):
    named = [(f"p{i}", make((9,), dtype, i)) for i, dtype in enumerate([np.float32, np.float16, np.float64,
                                                                        np.float32])]
    params = dict(named)
    params["p0"].grad.numpy()[[1, 4]] = np.nan
    params["p1"].grad.numpy()[2] = -np.inf
    params["p1"].numpy()[[0, 8]] = [np.inf, np.nan]
    params["p2"].numpy()[:] = np.inf  # nothing finite
    params["p2"].grad.numpy()[3] = np.inf
    tracker = ParameterTracker(named, extremes=extremes)
    stats = step_with(tracker, named, 0, random_update(named, 7))
    assert stats.grad_nan_counts == [2, 0, 0, 0] and stats.grad_inf_counts == [0, 1, 1, 0]
    assert stats.weight_nan_counts == [0, 1, 0, 0] and stats.weight_inf_counts == [0, 1, 9, 0]
    assert math.isnan(stats.grad_norms[0]) and math.isinf(stats.grad_norms[1]) and math.isnan(stats.weight_norms[1])
    assert math.isnan(stats.weight_min[2]) and math.isnan(stats.update_ratios[2])  # nothing finite; inf - inf
    assert all(math.isfinite(v) for v in (stats.grad_norms[3], stats.weight_norms[3], stats.update_ratios[3]))

    def make_p3_infinite():
        params["p3"].numpy()[5] = -np.inf

    stats = step_with(tracker, named, 1, make_p3_infinite)  # ‖Δw‖ is inf; its weights count it at the next step
    assert math.isinf(stats.update_norms[3]) and math.isinf(stats.update_ratios[3]) and stats.weight_inf_counts[3] == 0
    stats = step_with(tracker, named, 2, lambda: None)
    assert stats.weight_inf_counts[3] == 1


def test_float32_weights_whose_squares_overflow_have_their_float64_norm():
    p = engine.tensor(np.array([3e19, -4e19, 1.0], np.float32), requires_grad=True)
    p.grad = engine.tensor(np.array([1.0, 2.0, 2.0], np.float32))
    named = [("huge", p)]
    stats = step_with(ParameterTracker(named), named, 0, random_update(named, 0))
    assert stats.weight_norms[0] == pytest.approx(5e19, rel=1e-6) and stats.weight_inf_counts == [0]


@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_update_ratio_is_the_applied_update_of_sgd_momentum_and_adam(optimizer):
    named = [(f"p{i}", make(shape, dtype, i)) for i, (shape, dtype) in
             enumerate([((8, 5), np.float32), ((5,), np.float32), ((5, 3), np.float64), ((3,), np.float64)])]
    params = [p for _, p in named]
    if optimizer == "adam":
        opt = engine.optim.Adam(params, lr=1e-2, weight_decay=1e-3)
    else:
        opt = engine.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-2)
    tracker = ParameterTracker(named)
    rng = np.random.default_rng(5)
    for step in range(4):  # momentum and Adam's moments: later updates differ from lr·g
        for p in params:
            p.grad = engine.tensor(rng.standard_normal(p.shape).astype(p.numpy().dtype))
        before = [np.array(p.numpy(), np.float64) for p in params]
        stats = step_with(tracker, named, step, opt.step)
        for i, (p, w0) in enumerate(zip(params, before)):
            expected = np.linalg.norm(p.numpy().astype(np.float64) - w0) / np.linalg.norm(w0)
            assert stats.update_ratios[i] == pytest.approx(expected, rel=1e-5)


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
    b.grad = None
    tracker.begin(3)
    stats = tracker.end()
    assert stats.names == () and stats.grad_norms == [] and stats.weight_nan_counts == []


def test_a_parameter_whose_array_is_replaced_is_read_from_its_new_array():
    a = make((4,), np.float32, 0)
    tracker = ParameterTracker([("a", a)])
    tracker.begin(0)
    tracker.end()
    a._data = np.full(6, 3.0, np.float64)  # a new size and dtype (as loading a checkpoint of another shape would)
    a.grad = engine.tensor(np.ones(6, np.float64))
    tracker.begin(1)
    stats = tracker.end()
    assert stats.weight_norms[0] == pytest.approx(math.sqrt(54.0)) and stats.grad_norms[0] == pytest.approx(6 ** 0.5)


class ArrayParameter:
    """A stand-in with the two things the tracker reads: ``numpy()`` and ``grad.numpy()``."""

    def __init__(self, values: np.ndarray, grad: np.ndarray) -> None:
        self.values, self.grad = values, type("Grad", (), {"numpy": lambda _, g=grad: g})()

    def numpy(self) -> np.ndarray:
        return self.values

    @property
    def shape(self):
        return self.values.shape


def test_a_parameter_whose_array_is_not_contiguous_is_read_anew_each_step():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    param = ArrayParameter(base.T, np.ones((6, 4), np.float32))  # a transposed view: reshape(-1) would copy
    named = [("t", param)]
    tracker = ParameterTracker(named)
    for step in range(3):
        step_with(tracker, named, step, random_update(named, step))
