"""Profiler recorders recording at once each keep every op in their own op log (an engine recorder each)."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks
from engine.nn import functional as F
from engine.op_log import OpRecord
from instrumentation.profiler.recorder import Recorder


def _steps(count: int) -> None:
    engine.manual_seed(0)
    model = engine.nn.Sequential(engine.nn.Linear(4, 8), engine.nn.ReLU(), engine.nn.Linear(8, 3))
    optimizer = engine.optim.Adam(model.parameters(), lr=0.01)
    x, y = engine.tensor(np.ones((6, 4), dtype=np.float32)), engine.tensor(np.array([0, 1, 2, 0, 1, 2]))
    for _ in range(count):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def _without_times(ops: list[OpRecord]) -> list[OpRecord]:
    return [op._replace(start_ns=0, end_ns=0) for op in ops]


def test_several_recorders_record_the_same_ops_each_with_its_own_log():
    hooks.reset_step(0)
    first, second, stacked = Recorder(), Recorder(), Recorder(with_stack=True)
    first.start()
    second.start()
    stacked.start()
    try:
        assert hooks.op == (first.log.op, second.log.op, stacked.log.op)  # no slot: one recorder each
        _steps(2)
    finally:
        stacked.stop()
        second.stop()
        assert hooks.op == (first.log.op,)
        first.stop()
    assert not hooks.recorders and not hooks.ops_observed
    assert first.op_count == second.op_count == stacked.op_count > 10
    assert _without_times(first.ops) == _without_times(second.ops) == _without_times(stacked.ops)
    assert len(stacked.stacks) == stacked.op_count and all(stacked.stacks)
    assert all(frame.endswith("_steps") or "_steps" in frame for frame in stacked.stacks[0][:1])
    # one start time per op, read by the engine; each log reads its own end, in the order of the list
    for one, two in zip(first.ops, second.ops):
        assert one.start_ns == two.start_ns and one.start_ns <= one.end_ns <= two.end_ns
    assert [m[2] for m in first.memory] == [m[2] for m in second.memory]
    assert [s[1] for s in first.spans if s[0] == "step"] == [s[1] for s in second.spans if s[0] == "step"] == \
        ["step 0", "step 1"]


def test_a_stopped_recorder_records_nothing_more():
    first = Recorder()
    first.start()
    first.stop()
    second = Recorder(profile_memory=False)
    second.start()
    try:
        assert hooks.op == (second.log.op,)
        _steps(1)
    finally:
        second.stop()
    assert second.op_count > 0 and second.memory == [] and first.op_count == 0
