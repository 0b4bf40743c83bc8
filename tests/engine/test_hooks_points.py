"""Module, optimizer and OOM hook points, and errors that observers raise on purpose."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks, nn


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def module_begin(self, event):
        self.events.append(("module_begin", event.path))

    def module_end(self, event):
        self.events.append(("module_end", event.path))

    def op_start(self, event):
        self.events.append(("op", event.op))

    def optimizer_step_begin(self, event):
        self.events.append(("optimizer_step_begin", event.step))

    def optimizer_step_end(self, event):
        self.events.append(("optimizer_step_end", event.step))

    def step_end(self, event):
        self.events.append(("step_end", event.step))

    def oom(self, event):
        self.events.append(("oom", (event.requested_bytes, event.limit_bytes, event.op)))


@pytest.fixture
def recorder():
    observer = hooks.subscribe(Recorder())
    hooks.reset_step()
    try:
        yield observer
    finally:
        hooks.unsubscribe(observer)
        hooks.reset_step()
        engine.memory.set_limit(None)


def test_module_spans_nest_ops_and_close_in_order(recorder):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    model(engine.tensor(np.ones((2, 3), dtype=np.float32)))
    kinds = [e for e in recorder.events if e[0] != "op"]
    assert kinds == [("module_begin", ""), ("module_begin", "0"), ("module_end", "0"), ("module_begin", "1"),
                     ("module_end", "1"), ("module_end", "")]
    first_op = next(i for i, e in enumerate(recorder.events) if e[0] == "op")
    assert recorder.events.index(("module_begin", "0")) < first_op < recorder.events.index(("module_end", "0"))


def test_module_end_is_emitted_when_forward_raises(recorder):
    model = nn.Sequential(nn.Linear(3, 4))
    with pytest.raises(ValueError):
        model(engine.tensor(np.ones((2, 5), dtype=np.float32)))
    assert recorder.events[-1] == ("module_end", "")
    assert hooks.module_stack == [""]


def test_optimizer_step_is_bracketed_before_step_end(recorder):
    w = engine.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    optimizer = engine.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    optimizer.step()
    tail = [e for e in recorder.events if e[0] != "op"]
    assert tail == [("optimizer_step_begin", 0), ("optimizer_step_end", 0), ("step_end", 0)]


def test_oom_is_announced_then_raised(recorder):
    engine.memory.set_limit(engine.memory.stats().allocated_bytes + 600)
    a = engine.tensor(np.ones(100, dtype=np.float32))
    with pytest.raises(engine.OutOfMemoryError):
        a * 3.0
    (kind, (requested, limit, op)), = [e for e in recorder.events if e[0] == "oom"]
    assert requested == 400 and op == "Mul" and limit == engine.memory.stats().limit_bytes


def test_a_propagating_error_from_an_observer_stops_the_op():
    class Stop(hooks.PropagatingError):
        pass

    class Stopper:
        def op_end(self, event):
            raise Stop(event.op)

    observer = hooks.subscribe(Stopper())
    try:
        with pytest.raises(Stop, match="Exp"):
            engine.tensor([1.0]).exp()
    finally:
        hooks.unsubscribe(observer)
