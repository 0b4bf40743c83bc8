"""engine.op_log: what the log records per op and per step boundary, read by name, equals what observers see; the
per-op flag."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks
from engine.op import Function
from engine.nn import functional as F
from engine.op_log import DATA_WAIT, OPTIMIZER_STEP, STEP_END, BoundaryRecord, OpLog, OpRecord
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


class Boundaries:
    """The independent oracle for boundary records: the hook events themselves."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def step_begin(self, event: hooks.StepEvent) -> None:
        self.events.append(("step_begin", event))

    def step_end(self, event: hooks.StepEvent) -> None:
        self.events.append(("step_end", event))

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self.events.append(("data_wait", event))

    def optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        self.events.append(("optimizer_step_begin", event))

    def optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        self.events.append(("optimizer_step_end", event))


@pytest.fixture()
def installed():
    log = hooks.add_recorder(OpLog())
    yield log
    hooks.remove_recorder(log)


def test_every_op_is_logged_as_an_observer_sees_it(installed):
    hooks.reset_step(0)
    reference = hooks.subscribe(Ends())
    try:
        train_tiny(2)
    finally:
        hooks.unsubscribe(reference)
    records = installed.ops()
    assert len(records) == len(reference.ends) == installed.op_count() > 10
    assert all(type(r) is OpRecord for r in records)
    expected = [(e.op, e.phase, e.module, e.input_shapes, e.input_dtypes, e.step) for e in reference.ends]
    assert [(r.op, r.phase, r.module, r.input_shapes, r.input_dtypes, r.step) for r in records] == expected
    assert {r.phase for r in records} == {"forward", "backward"} and {r.step for r in records} == {0, 1}
    for r, s, e, a in zip(records, reference.starts, reference.ends, reference.allocated):
        assert s.time_ns <= r.start_ns <= r.end_ns <= e.time_ns  # the log's own clock, inside the events' span
        assert r.output_bytes == e.output_bytes and r.allocated_bytes == a and r.node is None
    assert len(installed.keys) < len(records)  # keys interned once: the second step adds none
    assert installed.keys == list(dict.fromkeys((r.op, r.phase, r.module, r.input_shapes, r.input_dtypes)
                                                for r in records))


def test_without_shapes_and_with_unusual_input_counts():
    log = hooks.add_recorder(OpLog(record_shapes=False))
    try:
        a = engine.tensor(np.ones((2, 3), np.float32), requires_grad=True)
        parts = [a * 1.0 for _ in range(4)]
        engine.concat(parts, axis=0).sum().backward()
    finally:
        hooks.remove_recorder(log)
    assert log.ops() and all(r.input_shapes == () and r.input_dtypes == () for r in log.ops())
    shaped = hooks.add_recorder(OpLog())
    try:
        engine.concat(parts, axis=0).sum()  # 4 inputs: the generic (not unrolled) key
    finally:
        hooks.remove_recorder(shaped)
    assert ((2, 3),) * 4 in [r.input_shapes for r in shaped.ops()]


def test_the_recorders_drive_the_one_per_op_flag(monkeypatch):
    assert not hooks.recorders and not hooks.ops_observed
    log = hooks.add_recorder(OpLog())
    assert hooks.ops_observed and hooks.op == (log.op,)
    observer = hooks.subscribe(Ends())
    hooks.remove_recorder(log)
    assert hooks.ops_observed  # the observer still wants events
    hooks.unsubscribe(observer)
    assert not hooks.ops_observed

    def refuse(*args):
        raise AssertionError("observed path taken with nothing observing")

    monkeypatch.setattr(Function, "_call_observed", refuse)
    x = engine.tensor(np.ones(3, np.float32), requires_grad=True)
    (x * x).sum().backward()
    log.clear()
    assert log.records() == [] and x.grad is not None


def test_step_optimizer_and_data_wait_boundaries_match_the_hook_events(installed):
    hooks.reset_step(0)
    engine.manual_seed(0)
    model = engine.nn.Sequential(engine.nn.Linear(4, 3), engine.nn.ReLU(), engine.nn.Linear(3, 2))
    optimizer = engine.optim.Adam(model.parameters(), lr=0.1)
    features = np.arange(60, dtype=np.float32).reshape(15, 4)
    data = engine.data.Dataset.from_tensor_slices((features, np.arange(15) % 2)).batch(5)
    oracle = hooks.subscribe(Boundaries())
    try:
        for x, y in data:  # the iterator opens each step and reports its wait
            optimizer.zero_grad()
            F.cross_entropy(model(engine.tensor(x)), engine.tensor(y)).backward()
            optimizer.step()
    finally:
        hooks.unsubscribe(oracle)
        hooks.reset_step(0)
    by_kind: dict[str, list] = {}
    for kind, event in oracle.events:  # observers still get every event with a log installed
        by_kind.setdefault(kind, []).append(event)
    # the fourth step_begin is the fetch that found the data exhausted (cancelled): it leaves no record
    assert [len(by_kind[k]) for k in ("step_begin", "step_end", "data_wait", "optimizer_step_begin")] == [4, 3, 3, 3]
    assert by_kind["step_begin"].pop().step == 3
    expected = []
    for begin, end, wait, opt_begin, opt_end in zip(*(by_kind[k] for k in (
            "step_begin", "step_end", "data_wait", "optimizer_step_begin", "optimizer_step_end"))):
        expected += [BoundaryRecord(DATA_WAIT, wait.step, wait.time_ns - wait.wait_ns, wait.time_ns, ""),
                     BoundaryRecord(OPTIMIZER_STEP, opt_end.step, opt_begin.time_ns, opt_end.time_ns, "Adam.step"),
                     BoundaryRecord(STEP_END, end.step, begin.time_ns, end.time_ns, "")]
    records = installed.records()
    boundaries = [(position, r) for position, r in enumerate(records) if type(r) is BoundaryRecord]
    assert [r for _, r in boundaries] == expected == installed.boundaries()
    assert installed.names == ["Adam.step"] and installed.name_codes == {engine.optim.Adam: 0}
    # each step's ops lie between its data wait and its optimizer step, and in time inside the step
    ops = [(position, r) for position, r in enumerate(records) if type(r) is OpRecord]
    for step in range(3):
        (at_wait, wait), (at_opt, opt), (_, end) = boundaries[3 * step:3 * step + 3]
        inside = [op for at, op in ops if at_wait < at < at_opt]
        assert inside and all(op.step == step and end.start_ns <= op.start_ns <= op.end_ns <= opt.start_ns
                              for op in inside)
        assert end.start_ns <= wait.start_ns <= wait.end_ns <= opt.start_ns <= opt.end_ns <= end.end_ns
    assert len(ops) + len(boundaries) == len(records) and [op for _, op in ops] == installed.ops()


def test_no_boundary_records_without_a_log_and_none_after_removal():
    hooks.reset_step(0)
    log = hooks.add_recorder(OpLog())
    hooks.remove_recorder(log)
    train_tiny(2)
    hooks.report_data_wait(1000)
    assert log.records() == [] and hooks.current_step() == 2
    hooks.reset_step(0)
