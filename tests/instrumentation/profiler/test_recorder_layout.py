"""The recorder's flat per-op storage reads back as named op records, with memory samples aligned to ops."""
from __future__ import annotations

import gc

import numpy as np

import engine
from engine import hooks, memory
from engine.nn import functional as F
from instrumentation.profiler.recorder import Recorder


class Reference:
    """An independent oracle: keeps every op_start/op_end event and the allocator's bytes after each op."""

    def __init__(self) -> None:
        self.starts: list = []
        self.ends: list = []
        self.allocated: list[int] = []

    def op_start(self, event) -> None:
        self.starts.append(event)

    def op_end(self, event) -> None:
        self.ends.append(event)
        self.allocated.append(memory.stats().allocated_bytes)


def _steps(count: int) -> None:
    engine.manual_seed(0)
    model = engine.nn.Sequential(engine.nn.Linear(4, 3), engine.nn.ReLU(), engine.nn.Linear(3, 2))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    x, y = engine.tensor(np.ones((5, 4), dtype=np.float32)), engine.tensor(np.array([0, 1, 0, 1, 1]))
    for _ in range(count):
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def test_ops_and_memory_read_back_as_the_events_said():
    hooks.reset_step(0)
    reference, recorder = Reference(), Recorder(record_shapes=True, profile_memory=True)
    hooks.subscribe(reference)
    recorder.start()
    try:
        _steps(3)
    finally:
        recorder.stop()
        hooks.unsubscribe(reference)
    ops = recorder.ops
    assert recorder.op_count == len(ops) == len(reference.ends) > 10
    assert recorder.log not in hooks.recorders  # stop() took the log out of the engine's recorders
    # The op log (recorder order -1) reads its times inside the span the observer's two events bracket.
    expected = [(e.op, e.phase, e.module, e.step, e.input_shapes, e.input_dtypes, e.output_bytes)
                for e in reference.ends]
    assert [(op.op, op.phase, op.module, op.step, op.input_shapes, op.input_dtypes, op.output_bytes)
            for op in ops] == expected
    assert all(s.time_ns <= op.start_ns <= op.end_ns <= e.time_ns
               for s, e, op in zip(reference.starts, reference.ends, ops))
    assert recorder.memory == [(op.end_ns, "cpu", a) for op, a in zip(ops, reference.allocated)]
    assert [op.allocated_bytes for op in ops] == reference.allocated
    keys = {(op.op, op.phase, op.module, op.input_shapes, op.input_dtypes) for op in ops}
    assert len(recorder.log.keys) == len(keys) < len(ops)  # interned once per key
    assert [s[1] for s in recorder.spans if s[0] == "step"] == ["step 0", "step 1", "step 2"]


def test_without_shapes_or_memory_and_after_clear():
    hooks.reset_step(0)
    recorder = Recorder(record_shapes=False, profile_memory=False)
    recorder.start()
    try:
        _steps(1)
        assert recorder.op_count > 0 and all(op.input_shapes == () and op.input_dtypes == () for op in recorder.ops)
        assert recorder.memory == []
        recorder.clear()
        assert recorder.op_count == 0 and recorder.spans == []
        _steps(1)  # the observer still appends into the cleared lists
        assert recorder.op_count > 0 and {op.step for op in recorder.ops} == {1}
    finally:
        recorder.stop()
        gc.collect()
