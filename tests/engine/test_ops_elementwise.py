"""Elementwise ops, matmul, comparisons and where: NumPy forward reference + float64 numerical gradients."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from gradcheck import check_op, random_array

BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 1, 4), (2, 4)), ((), (2, 3)), ((2, 3), ()), ((4,), (3, 4)),
                   ((2, 1), (1, 3)), ((1,), (5,)), ((2, 3, 1), (1, 1, 4))]


@pytest.mark.parametrize("a_shape,b_shape", BROADCAST_PAIRS)
@pytest.mark.parametrize("name,op,reference", [
    ("add", lambda a, b: a + b, np.add),
    ("sub", lambda a, b: a - b, np.subtract),
    ("mul", lambda a, b: a * b, np.multiply),
    ("div", lambda a, b: a / b, np.divide),
    ("pow", lambda a, b: a ** b, np.power),
])
def test_binary_ops_broadcast(name, op, reference, a_shape, b_shape):
    a = random_array(a_shape, seed=1, low=0.5, high=2.0) if name == "pow" else random_array(a_shape, seed=1)
    b = random_array(b_shape, seed=2, away_from=(0.0,), margin=0.3) if name == "div" else random_array(b_shape, seed=2)
    check_op(op, reference, a, b)


@pytest.mark.parametrize("name,op,reference", [
    ("radd", lambda a: 2.5 + a, lambda a: 2.5 + a),
    ("rsub", lambda a: 2.5 - a, lambda a: 2.5 - a),
    ("rmul", lambda a: 3 * a, lambda a: 3 * a),
    ("rdiv", lambda a: 2.0 / a, lambda a: 2.0 / a),
    ("square", lambda a: a ** 2, lambda a: a ** 2),
    ("cube_negative_base", lambda a: a ** 3, lambda a: a ** 3),
    ("rpow", lambda a: 2.0 ** a, lambda a: 2.0 ** a),
    ("neg", lambda a: -a, np.negative),
    ("numpy_scalar_left", lambda a: np.float64(1.5) * a, lambda a: 1.5 * a),
])
def test_scalar_operands_and_neg(name, op, reference):
    check_op(op, reference, random_array((2, 3), seed=3, away_from=(0.0,), margin=0.3))


MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((3, 4), (2, 4, 2))]


@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES)
def test_matmul(a_shape, b_shape):
    check_op(lambda a, b: a @ b, np.matmul, random_array(a_shape, seed=4), random_array(b_shape, seed=5))


def test_matmul_one_side_constant():
    b = random_array((4, 2), seed=6)
    check_op(lambda a: a @ engine.tensor(b), lambda a: a @ b, random_array((3, 4), seed=7), check_float32=False)
    check_op(lambda a: engine.tensor(b.T) @ a, lambda a: b.T @ a, random_array((4, 3), seed=8), check_float32=False)


@pytest.mark.parametrize("name,op,reference,kwargs", [
    ("exp", lambda x: x.exp(), np.exp, {}),
    ("log", lambda x: x.log(), np.log, {"low": 0.2, "high": 3.0}),
    ("sqrt", lambda x: x.sqrt(), np.sqrt, {"low": 0.2, "high": 3.0}),
    ("abs", lambda x: x.abs(), np.abs, {"away_from": (0.0,)}),
    ("abs_builtin", lambda x: abs(x), np.abs, {"away_from": (0.0,)}),
    ("clip_both", lambda x: x.clip(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), {"away_from": (-0.5, 0.7)}),
    ("clip_min", lambda x: x.clip(min=0.3), lambda x: np.maximum(x, 0.3), {"away_from": (0.3,)}),
    ("clip_max", lambda x: x.clip(max=-0.2), lambda x: np.minimum(x, -0.2), {"away_from": (-0.2,)}),
    ("tanh", lambda x: x.tanh(), np.tanh, {}),
    ("sigmoid", lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), {"low": -6.0, "high": 6.0}),
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), {"away_from": (0.0,)}),
    ("leaky_relu", lambda x: x.leaky_relu(0.1), lambda x: np.where(x > 0, x, 0.1 * x), {"away_from": (0.0,)}),
    ("leaky_relu_default", lambda x: x.leaky_relu(), lambda x: np.where(x > 0, x, 0.01 * x), {"away_from": (0.0,)}),
    ("gelu", lambda x: x.gelu(), lambda x: x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
     {"low": -4.0, "high": 4.0}),
])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 2)])
def test_unary_ops(name, op, reference, kwargs, shape):
    check_op(op, reference, random_array(shape, seed=9, **kwargs))


def test_sigmoid_and_tanh_saturate_without_overflow():
    x = engine.tensor(np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=np.float32), requires_grad=True)
    with np.errstate(over="raise", invalid="raise"):
        y = x.sigmoid()
    np.testing.assert_allclose(y.numpy(), [0.0, 0.0, 0.5, 1.0, 1.0], atol=1e-7)
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.tanh().numpy(), np.tanh(x.numpy()))


def test_gelu_matches_torch_exact_gelu():
    torch = pytest.importorskip("torch")
    values = np.linspace(-6, 6, 97)
    x = engine.tensor(values, requires_grad=True)
    x.gelu().sum().backward()
    reference = torch.tensor(values, requires_grad=True)
    torch.nn.functional.gelu(reference).sum().backward()
    expected = torch.nn.functional.gelu(reference).detach().numpy()
    np.testing.assert_allclose(x.gelu().numpy(), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cond_shape,a_shape,b_shape", [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()),
                                                        ((4,), (3, 4), (3, 1)), ((2, 1, 3), (3,), (2, 1, 1))])
def test_where_routes_gradient(cond_shape, a_shape, b_shape):
    cond = np.random.default_rng(10).random(cond_shape) > 0.5
    check_op(lambda a, b: engine.where(cond, a, b), lambda a, b: np.where(cond, a, b),
             random_array(a_shape, seed=11), random_array(b_shape, seed=12))
    check_op(lambda a, b: engine.where(engine.tensor(cond), a, b), lambda a, b: np.where(cond, a, b),
             random_array(a_shape, seed=11), random_array(b_shape, seed=12))


def test_where_with_python_scalar_keeps_dtype():
    x = engine.tensor(np.array([-1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = engine.where(x > 0, x, 0.0)
    assert y.dtype == np.float32
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0])


@pytest.mark.parametrize("op,reference", [
    (lambda a, b: a < b, np.less), (lambda a, b: a <= b, np.less_equal), (lambda a, b: a > b, np.greater),
    (lambda a, b: a >= b, np.greater_equal), (lambda a, b: a == b, np.equal), (lambda a, b: a != b, np.not_equal),
])
def test_comparisons_broadcast_and_carry_no_gradient(op, reference):
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    b = np.array([2.0, 2.0, 2.0])
    result = op(engine.tensor(a, requires_grad=True), engine.tensor(b, requires_grad=True))
    assert result.dtype == np.bool_ and not result.requires_grad and result.grad_fn is None
    np.testing.assert_array_equal(result.numpy(), reference(a, b))
    np.testing.assert_array_equal(op(engine.tensor(a), 2.0).numpy(), reference(a, 2.0))
    np.testing.assert_array_equal(op(2.0, engine.tensor(a)).numpy(), reference(2.0, a))


def test_mixed_with_constant_only_differentiates_what_requires_grad():
    a = engine.tensor(random_array((2, 3), seed=13), requires_grad=True)
    b = engine.tensor(random_array((2, 3), seed=14))
    (a * b + b / (a * a + 1)).sum().backward()
    assert b.grad is None and a.grad is not None
