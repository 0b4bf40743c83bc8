"""engine.op_log: what the engine appends per op equals what an op_end observer sees, and the slot's bookkeeping."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks
from engine.function import Function
from engine.op_log import OP_LOG_STRIDE, OpLog
from tiny_training import train_tiny


class Ends:
    def __init__(self) -> None:
        self.starts: list[hooks.OpEvent] = []
        self.ends: list[hooks.OpEvent] = []
        self.allocated: list[int] = []

    def op_start(self, event: hooks.OpEvent) -> None:
        self.starts.append(event)

    def op_end(self, event: hooks.OpEvent) -> None:
        self.ends.append(event)
        self.allocated.append(engine.memory.stats().allocated_bytes)


def _records(log: OpLog) -> list[tuple]:
    data = log.data
    return [log.keys[data[i]] + tuple(data[i + 1:i + OP_LOG_STRIDE]) for i in range(0, len(data), OP_LOG_STRIDE)]


@pytest.fixture()
def installed():
    log = OpLog()
    assert hooks.set_op_log(log) is None
    yield log
    hooks.set_op_log(None)


def test_every_op_is_logged_as_an_observer_sees_it(installed):
    hooks.reset_step(0)
    reference = hooks.subscribe(Ends())
    try:
        train_tiny(2)
    finally:
        hooks.unsubscribe(reference)
    records = _records(installed)
    assert len(records) == len(reference.ends) > 10
    expected = [(e.op, e.phase, e.module, e.input_shapes, e.input_dtypes, e.step) for e in reference.ends]
    assert [r[:6] for r in records] == expected
    assert {r[1] for r in records} == {"forward", "backward"} and {r[5] for r in records} == {0, 1}
    for (*_, start, end, nbytes, allocated), s, e, a in zip(records, reference.starts, reference.ends,
                                                           reference.allocated):
        assert s.time_ns <= start <= end <= e.time_ns  # the log's own clock, inside the events' span
        assert nbytes == e.output_bytes and allocated == a
    assert len(installed.keys) < len(records)  # keys interned once: the second step adds none
    assert installed.keys == list(dict.fromkeys(r[:5] for r in records))


def test_without_shapes_and_with_unusual_input_counts():
    log = OpLog(record_shapes=False)
    hooks.set_op_log(log)
    try:
        a = engine.tensor(np.ones((2, 3), np.float32), requires_grad=True)
        parts = [a * 1.0 for _ in range(4)]
        engine.concat(parts, axis=0).sum().backward()
    finally:
        hooks.set_op_log(None)
    assert log.keys and all(key[3:] == ((), ()) for key in log.keys)
    shaped = OpLog()
    hooks.set_op_log(shaped)
    try:
        engine.concat(parts, axis=0).sum()  # 4 inputs: the generic (not unrolled) key
    finally:
        hooks.set_op_log(None)
    assert ((2, 3),) * 4 in [key[3] for key in shaped.keys]


def test_the_slot_drives_the_one_per_op_flag(monkeypatch):
    assert hooks.op_log is None and not hooks.ops_observed
    log = OpLog()
    hooks.set_op_log(log)
    assert hooks.ops_observed
    observer = hooks.subscribe(Ends())
    hooks.set_op_log(None)
    assert hooks.ops_observed  # the observer still wants events
    hooks.unsubscribe(observer)
    assert not hooks.ops_observed

    def refuse(*args):
        raise AssertionError("observed path taken with nothing observing")

    monkeypatch.setattr(Function, "_call_observed", refuse)
    x = engine.tensor(np.ones(3, np.float32), requires_grad=True)
    (x * x).sum().backward()
    log.clear()
    assert log.data == [] and x.grad is not None
