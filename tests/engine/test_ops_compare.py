"""Comparisons are Functions: every recorder sees them as it sees any op, they stay outside the autograd graph, and
engine.function traces and replays them through the ordinary op path."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks
from engine.op_log import OpLog
from engine.ops.compare import Equal, Greater, GreaterEqual, Less, LessEqual, NotEqual


class OpNames:
    """An op recorder: the name of every op that reached ``op_begin`` and ``op``."""

    def __init__(self) -> None:
        self.begun: list[str] = []
        self.ended: list[str] = []

    def op_begin(self, op: str, module: str, inputs: object) -> None:
        self.begun.append(op)

    def op(self, op: str, module: str, inputs: object, outputs: object, output_bytes: int, start_ns: int) -> None:
        self.ended.append(op)


@pytest.fixture
def recorder():
    names = OpNames()
    hooks.add_recorder(names)
    yield names
    hooks.remove_recorder(names)


def _logged_ops(log: OpLog) -> list[str]:
    return [record.op for record in log.ops()]


@pytest.mark.parametrize("compare,name", [
    (lambda a, b: a < b, "Less"), (lambda a, b: a <= b, "LessEqual"), (lambda a, b: a > b, "Greater"),
    (lambda a, b: a >= b, "GreaterEqual"), (lambda a, b: a == b, "Equal"), (lambda a, b: a != b, "NotEqual"),
])
def test_an_op_recorder_sees_comparisons_like_every_op(recorder, compare, name):
    a = engine.tensor(np.array([1.0, 2.0, 3.0]))
    b = engine.tensor(np.array([2.0, 2.0, 2.0]))
    compare(a, b)
    a * b
    assert recorder.begun == [name, "Mul"] and recorder.ended == [name, "Mul"]


def test_the_op_log_records_comparisons():
    log = OpLog()
    hooks.add_recorder(log)
    try:
        a = engine.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        b = engine.tensor(np.array([2.0, 2.0, 2.0]))
        a < b
        a * b
    finally:
        hooks.remove_recorder(log)
    assert _logged_ops(log) == ["Less", "Mul"]
    assert log.data[4] == 3  # output_bytes: three bools


def test_comparisons_stay_outside_the_graph_and_never_run_backward(monkeypatch):
    def refuse(self, grad):
        raise AssertionError("a comparison's backward ran")

    for op in (Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual):
        monkeypatch.setattr(op, "backward", refuse)
    x = engine.tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    mask = x > 0
    assert not mask.requires_grad and mask.grad_fn is None and mask.dtype == np.bool_
    y = engine.where(mask, x * x, -x) + (x <= 1.0).astype("float64") * x
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0 + 1.0, 2 * 0.5 + 1.0, 2 * 2.0])


def _step(x, w):
    y = x * w
    keep = (y > 0.25) != (x < -0.5)
    return engine.where(keep, y, y * 0.5).sum(), keep


@pytest.mark.parametrize("passes", [None, []], ids=["optimised", "unoptimised"])
def test_engine_function_replays_comparisons_as_eager(recorder, passes):
    traced = engine.function(_step) if passes is None else engine.function(_step, passes=passes)
    rng = np.random.default_rng(3)
    w = engine.tensor(rng.standard_normal(8))
    for _ in range(4):  # the first call traces (eagerly), the others replay
        x = engine.tensor(rng.standard_normal(8))
        recorder.ended.clear()
        loss, keep = traced(x, w)
        replayed = list(recorder.ended)
        recorder.ended.clear()
        eager_loss, eager_keep = _step(x, w)
        np.testing.assert_array_equal(keep.numpy(), eager_keep.numpy())
        assert loss.item() == eager_loss.item()
        comparisons = [n for n in recorder.ended if n in ("Greater", "Less", "NotEqual")]
        assert comparisons == ["Greater", "Less", "NotEqual"]
        if passes == []:
            assert replayed == recorder.ended
        else:  # fusion may merge a comparison with the next elementwise op; the replay still names each
            assert all(any(name in n for n in replayed) for name in comparisons), replayed
