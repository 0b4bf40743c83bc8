"""What a graph cannot replay is refused by the tracer's own recorder methods, naming the user's line, and leaves
nothing attached: the recorder list is as before and eager code runs unobserved."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks, nn


def _model_and_input():
    engine.manual_seed(0)
    return nn.Linear(3, 1), engine.tensor(np.ones((2, 3), np.float32))


def _refused(step, x, match: str) -> None:
    before = list(hooks.recorders)
    with pytest.raises(engine.TracingError, match=match) as info:
        step(x)
    assert "test_tracer_refusals.py" in str(info.value) and isinstance(info.value, hooks.PropagatingError)
    assert hooks.recorders == before and not hooks.ops_observed


def test_engine_grad_inside_a_traced_function_is_refused() -> None:
    model, x = _model_and_input()
    _refused(engine.function(lambda x: engine.grad(model(x).sum(), [model.weight])), x,
             r"engine.grad\(\) is not supported inside engine.function")


def test_backward_with_a_given_gradient_is_refused() -> None:
    model, x = _model_and_input()

    def step(x):
        out = model(x)
        out.backward(engine.tensor(np.ones((2, 1), np.float32)))

    _refused(engine.function(step), x, r"backward\(grad=...\) is not supported while tracing")
    assert model.weight.grad is None  # refused before the walk began


def test_an_optimizer_closure_is_refused() -> None:
    model, x = _model_and_input()
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    _refused(engine.function(lambda x: optimizer.step(lambda: model(x).sum())), x,
             r"optimizer.step\(closure\) is not supported inside engine.function")


def test_eager_backward_after_a_refused_trace_matches_a_fresh_eager_one() -> None:
    model, x = _model_and_input()
    _refused(engine.function(lambda x: engine.grad(model(x).sum(), [model.weight])), x, "engine.grad")
    model(x).sum().backward()
    np.testing.assert_array_equal(model.weight.grad.numpy(), np.full((1, 3), 2.0, np.float32))
