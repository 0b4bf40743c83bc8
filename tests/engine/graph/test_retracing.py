"""Signatures, retracing and what tracing refuses."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import engine
from engine import nn
from tests.engine.graph.digits_step import batches, make


def test_new_batch_size_retraces_once():
    _, _, step = make("mlp")
    traced = engine.function(step)
    for batch in (32, 32, 16, 16, 32, 16):
        x, y = next(batches(1, batch=batch))
        traced(x, y)
    assert traced.trace_count == 2
    assert [g.signature for g, _ in traced.graphs()] == ["x: float32[32, 64] cpu; y: int64[32] cpu",
                                                         "x: float32[16, 64] cpu; y: int64[16] cpu"]


def test_changing_python_scalar_retraces_and_warns_naming_it():
    w = engine.tensor(np.ones(3, np.float32), requires_grad=True)

    @engine.function
    def scaled(x, factor):
        return (x * w * factor).sum()

    x = engine.tensor(np.arange(3, dtype=np.float32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [scaled(x, float(f)).item() for f in range(1, 7)]
    assert results == [3.0 * f for f in range(1, 7)]
    assert scaled.trace_count == 6
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert messages and "'factor'" in messages[0] and "traced 5 times" in messages[0]
    assert scaled(x, 2.0).item() == 6.0 and scaled.trace_count == 6  # a seen value replays


def test_same_scalar_does_not_warn():
    @engine.function
    def f(x, k):
        return x * k

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(10):
            f(engine.tensor([1.0, 2.0]), 3)
    assert f.trace_count == 1


@pytest.mark.parametrize("read", ["if loss > 0.5:", "loss.item()", "float(loss)", "loss.numpy()", "bool(loss)"])
def test_reading_a_value_while_tracing_names_the_line(read):
    model = nn.Linear(4, 1)
    source = ("def step(x):\n"
              "    loss = model(x).sum()\n"
              f"    {read if read.startswith('if') else 'value = ' + read}\n"
              + ("        loss = loss * 2\n" if read.startswith("if") else "")
              + "    return loss\n")
    scope = {"model": model}
    exec(compile(source, "user_step.py", "exec"), scope)
    traced = engine.function(scope["step"])
    with pytest.raises(engine.TracingError, match=r"user_step\.py:3") as info:
        traced(engine.tensor(np.ones((2, 4), np.float32)))
    assert "step" in str(info.value)


def test_reading_parameters_and_outside_values_is_allowed():
    w = engine.tensor([2.0], requires_grad=True)

    @engine.function
    def f(x):
        assert w.item() == 2.0  # a parameter's value at trace time: a Python side effect
        return x * w

    assert f(engine.tensor([3.0])).item() == 6.0
    assert f(engine.tensor([4.0])).item() == 8.0


def test_unknown_pass_name_is_refused():
    with pytest.raises(ValueError, match="unknown pass.*fusion_typo"):
        engine.function(lambda x: x, passes=["fusion_typo"])


def test_eager_unaffected_after_a_tracing_error():
    model = nn.Linear(2, 1)

    @engine.function
    def bad(x):
        return model(x).sum().item()

    with pytest.raises(engine.TracingError):
        bad(engine.tensor(np.ones((1, 2), np.float32)))
    assert isinstance(model(engine.tensor(np.ones((1, 2), np.float32))).sum().item(), float)


def test_a_numpy_array_argument_is_refused_naming_it():
    @engine.function
    def f(x, labels):
        return x * 2

    with pytest.raises(TypeError, match="argument 'labels' is an array.*engine.tensor"):
        f(engine.tensor([1.0]), np.array([1, 2]))
