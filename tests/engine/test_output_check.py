"""A recorder's ``op`` (the numerics check's way in): called once per op with what an op_end observer sees, errors
contained."""
from __future__ import annotations

import pytest

from engine import hooks
from recording_observers import OpRecorder
from tiny_training import train_tiny


class Checks:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def op(self, op: str, module: str, inputs: tuple, outputs: tuple, output_bytes: int, start_ns: int) -> None:
        self.calls.append((op, module, hooks.current_phase(), hooks.current_step(), tuple(inputs), tuple(outputs)))


@pytest.fixture()
def checks():
    check = hooks.add_recorder(Checks())
    yield check
    hooks.remove_recorder(check)


def test_every_op_is_checked_with_what_an_observer_sees(checks):
    hooks.reset_step(0)
    reference = hooks.subscribe(OpRecorder(starts=False, memory=False))
    try:
        train_tiny(2)
    finally:
        hooks.unsubscribe(reference)
    assert len(checks.calls) == len(reference.ends) > 10
    for (op, module, phase, step, inputs, outputs), event in zip(checks.calls, reference.ends):
        assert (op, module, phase, step) == (event.op, event.module, event.phase, event.step)
        assert all(a is b for a, b in zip(inputs, event.inputs)) and len(inputs) == len(event.inputs)
        present = [o for o in outputs if o is not None]
        assert len(present) == len(event.outputs) and all(a is b for a, b in zip(present, event.outputs))
    assert {c[2] for c in checks.calls} == {"forward", "backward"} and {c[3] for c in checks.calls} == {0, 1}
    backward = [c for c in checks.calls if c[2] == "backward"]
    assert any(o is None for c in backward for o in c[5])  # the labels of cross_entropy need no gradient


def test_a_propagating_error_stops_the_op_and_others_are_reported_once(capsys):
    class Stop(hooks.PropagatingError):
        pass

    class Stopper:
        def op(self, op, module, inputs, outputs, output_bytes, start_ns):
            if op == "ReLU":
                raise Stop(op)

    stop = hooks.add_recorder(Stopper())
    try:
        with pytest.raises(Stop):
            train_tiny(1)
    finally:
        hooks.remove_recorder(stop)

    class Broken:
        def op(self, op, module, inputs, outputs, output_bytes, start_ns):
            raise ValueError("boom")

    broken, healthy = hooks.add_recorder(Broken()), hooks.add_recorder(Checks())
    try:
        train_tiny(2)  # training goes on, and the recorder after the broken one gets every op
    finally:
        hooks.remove_recorder(broken)
        hooks.remove_recorder(healthy)
    assert capsys.readouterr().err.count("boom") == 1 and len(healthy.calls) > 10


def test_an_op_recorder_drives_the_one_per_op_flag():
    assert not hooks.ops_observed
    with pytest.raises(TypeError, match="none of the recorder methods"):
        hooks.add_recorder(42)
    check = hooks.add_recorder(Checks())
    assert hooks.ops_observed
    hooks.remove_recorder(check)
    assert not hooks.ops_observed
