"""Observer hook points: op start/end events in forward and backward, failing observers, unsubscribe, cost."""
from __future__ import annotations

import timeit

import numpy as np
import pytest

import engine
from engine import hooks
from recording_observers import OpRecorder


class Broken:
    calls = 0

    def op_end(self, event: hooks.OpEvent) -> None:
        Broken.calls += 1
        raise ZeroDivisionError("observer bug")


@pytest.fixture
def recorder():
    observer = hooks.subscribe(OpRecorder())
    yield observer
    hooks.unsubscribe(observer)
    assert not hooks.recorders and not hooks.ops_observed and not hooks.memory_observed


def test_forward_events_carry_op_shapes_dtypes_and_output_bytes(recorder):
    a = engine.tensor(np.ones((2, 3), dtype=np.float32))
    b = engine.tensor(np.ones((3, 4), dtype=np.float64))
    out = a @ b
    start, end = recorder.starts[-1], recorder.ends[-1]
    assert start.op == end.op == "MatMul" and start.phase == end.phase == "forward"
    assert start.input_shapes == ((2, 3), (3, 4)) and start.input_dtypes == ("float32", "float64")
    assert start.output_bytes == 0 and start.outputs == ()
    assert end.output_bytes == out.numpy().nbytes == 2 * 4 * 8
    assert end.time_ns >= start.time_ns


def test_backward_events_have_phase_backward_and_gradient_bytes(recorder):
    x = engine.tensor(np.ones((4, 5), dtype=np.float32), requires_grad=True)
    w = engine.tensor(np.ones((5, 2), dtype=np.float32), requires_grad=True)
    loss = (x @ w).relu().sum()
    recorder.starts.clear()
    recorder.ends.clear()
    loss.backward()
    assert [e.op for e in recorder.starts] == ["SumBackward", "ReLUBackward", "MatMulBackward"]
    assert all(e.phase == "backward" for e in recorder.starts + recorder.ends)
    matmul_end = recorder.ends[-1]
    assert matmul_end.input_shapes == ((4, 2),)
    assert matmul_end.output_bytes == x.numpy().nbytes + w.numpy().nbytes
    assert hooks.current_phase() == "forward"  # restored after backward


def test_alloc_and_free_events_name_op_and_category(recorder):
    x = engine.tensor(np.zeros(10, dtype=np.float32))
    y = x.exp()
    allocs = [e for e in recorder.memory if e.action == "alloc"]
    assert (allocs[-1].op, allocs[-1].category, allocs[-1].bytes, allocs[-1].shape) == ("Exp", "activation", 40, (10,))
    del y
    frees = [e for e in recorder.memory if e.action == "free"]
    assert frees[-1].bytes == 40 and frees[-1].buffer_id == allocs[-1].buffer_id


def test_failing_observer_is_reported_once_and_training_continues(capsys):
    broken, recorder = hooks.subscribe(Broken()), hooks.subscribe(OpRecorder())
    try:
        Broken.calls = 0
        x = engine.tensor(np.array([1.0, 2.0]), requires_grad=True)
        for _ in range(3):
            (x * x).sum().backward()
    finally:
        hooks.unsubscribe(broken)
        hooks.unsubscribe(recorder)
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])
    assert Broken.calls > 3 and len(recorder.ends) == Broken.calls  # both kept receiving every event
    err = capsys.readouterr().err
    assert err.count("Broken.op_end failed") == 1 and "ZeroDivisionError: observer bug" in err


def test_a_resubscribed_failing_observer_is_reported_again(capsys):
    broken = Broken()
    for _ in range(2):
        hooks.subscribe(broken)
        try:
            engine.tensor([1.0]) * 2
            engine.tensor([1.0]) * 3
        finally:
            hooks.unsubscribe(broken)
    assert capsys.readouterr().err.count("Broken.op_end failed") == 2


def test_unsubscribe_detaches_every_hook_point():
    recorder = hooks.subscribe(OpRecorder())
    hooks.subscribe(recorder)  # subscribing twice is a no-op
    assert len(hooks.op) == 1 and recorder in hooks.observers()
    hooks.unsubscribe(recorder)
    engine.tensor([1.0]) * 2
    assert recorder.starts == [] and recorder.ends == [] and recorder not in hooks.observers()
    assert not any(getattr(hooks, name) for name in hooks.RECORDER_METHODS)
    hooks.unsubscribe(recorder)  # unknown observers are ignored


def test_subscribe_rejects_objects_without_hook_methods():
    with pytest.raises(TypeError, match="none of the hook methods"):
        hooks.subscribe(object())


def test_measure_cost_of_the_unobserved_hook_check():
    """Prints (does not assert) what the ``if hooks.call_hooks_due`` test costs per op."""
    namespace = {"hooks": hooks}
    number = 200_000
    check = min(timeit.repeat("if hooks.call_hooks_due: pass", globals=namespace,
                              number=number, repeat=5)) / number
    empty = min(timeit.repeat("pass", number=number, repeat=5)) / number
    a = engine.tensor(np.ones(16, dtype=np.float32))
    op = min(timeit.repeat(lambda: a * a, number=20_000, repeat=5)) / 20_000
    print(f"\nhook check: {(check - empty) * 1e9:.1f} ns per op; a 16-element mul: {op * 1e9:.0f} ns "
          f"({(check - empty) / op:.1%} of it)")


def test_one_callable_serving_two_hook_points_subscribes_and_unsubscribes_cleanly():
    events: list = []

    class Both:
        alloc = free = staticmethod(events.append)

    observer = hooks.subscribe(Both())
    x = engine.tensor(np.ones(4, np.float32))
    del x
    hooks.unsubscribe(observer)
    assert {e.action for e in events} == {"alloc", "free"}
    assert not hooks.buffer_alloc and not hooks.buffer_free and observer not in hooks.observers()
    count = len(events)
    engine.tensor(np.ones(4, np.float32))
    assert len(events) == count
