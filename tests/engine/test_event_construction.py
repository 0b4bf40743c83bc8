"""Events built on the observed path (tuple.__new__) are complete OpEvent/MemoryEvent values; memory.allocated_bytes."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks, memory
from engine.nn import functional as F
from recording_observers import OpRecorder


def _train_step(observer) -> None:
    hooks.subscribe(observer)
    try:
        engine.manual_seed(0)
        layer = engine.nn.Linear(4, 3)
        x = engine.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
        F.cross_entropy(layer(x).relu(), engine.tensor(np.array([0, 2]))).backward()
    finally:
        hooks.unsubscribe(observer)


def test_backward_events_are_full_op_events_with_or_without_op_start():
    ends_only, both = OpRecorder(starts=False), OpRecorder()
    _train_step(ends_only)
    _train_step(both)
    for collected in (ends_only, both):
        backward = [e for e in collected.ends if e.phase == "backward"]
        assert [e.op for e in backward] == ["CrossEntropyBackward", "ReLUBackward", "LinearBackward"]
        for event in backward:
            assert type(event) is hooks.OpEvent and len(event) == len(hooks.OpEvent._fields)
            assert event.input_shapes == (event.inputs[0].shape,)
            assert event.input_dtypes == (str(event.inputs[0].dtype),)
            assert event.output_bytes == sum(o.nbytes for o in event.outputs) > 0
    starts = [e for e in both.starts if e.phase == "backward"]
    assert [e.op for e in starts] == ["CrossEntropyBackward", "ReLUBackward", "LinearBackward"]
    assert all(e.outputs == () and e.output_bytes == 0 for e in starts)
    ends = [e for e in both.ends if e.phase == "backward"]
    assert all(s.time_ns <= e.time_ns and s.step == e.step and s.module == e.module for s, e in zip(starts, ends))


def test_forward_end_event_copies_the_start_fields():
    both = OpRecorder()
    _train_step(both)
    forward_starts = [e for e in both.starts if e.phase == "forward"]
    forward_ends = [e for e in both.ends if e.phase == "forward"]
    for start, end in zip(forward_starts, forward_ends):
        assert tuple(end[:7]) == tuple(start[:7]) and type(end) is hooks.OpEvent
        assert end.output_bytes == sum(o.nbytes for o in end.outputs) and end.time_ns >= start.time_ns


def test_memory_events_carry_every_field():
    observer = OpRecorder(starts=False)
    _train_step(observer)
    allocs = [e for e in observer.memory if e.action == "alloc"]
    assert allocs and all(type(e) is hooks.MemoryEvent and e.bytes > 0 and e.dtype and e.time_ns > 0 for e in allocs)
    assert any(e.op == "Linear" and e.shape == (2, 3) and e.category == "activation" for e in allocs)
    frees = [e for e in observer.memory if e.action == "free"]
    assert frees and all(e.shape == () and e.dtype == "" for e in frees)


def test_allocated_bytes_follows_stats_and_unknown_devices_hold_nothing():
    before = memory.allocated_bytes()
    assert before == memory.stats("cpu").allocated_bytes
    t = engine.tensor(np.zeros((100, 10), dtype=np.float64))
    assert memory.allocated_bytes("cpu") == before + 8000 == memory.stats().allocated_bytes
    del t
    assert memory.allocated_bytes() == before
    assert memory.allocated_bytes("no-such-device") == 0
