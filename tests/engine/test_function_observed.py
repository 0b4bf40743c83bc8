"""Function's observed path: an op_end-only observer gets the same one event per op as one that also watches
op_start."""
from __future__ import annotations

import dataclasses

import numpy as np

import engine
from engine import hooks
from engine.op import Function
from engine.nn import functional as F
from recording_observers import OpRecorder


def _forward_ops(observer) -> None:
    hooks.subscribe(observer)
    try:
        engine.manual_seed(0)
        layer = engine.nn.Linear(4, 3)
        x = engine.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
        loss = F.cross_entropy(layer(x).relu(), engine.tensor(np.array([0, 2])))
        loss.backward()
    finally:
        hooks.unsubscribe(observer)


def _without_time(event: hooks.OpEvent) -> dict:
    names = getattr(type(event), "_fields", None) or [f.name for f in dataclasses.fields(event)]
    fields = {name: getattr(event, name) for name in names}
    fields.pop("time_ns")
    fields["inputs"] = [np.asarray(a).tolist() for a in fields["inputs"]]
    fields["outputs"] = [np.asarray(a).tolist() for a in fields["outputs"]]
    return fields


def test_end_events_are_the_same_with_or_without_an_op_start_observer():
    ends_only, both = OpRecorder(starts=False, memory=False), OpRecorder(memory=False)
    _forward_ops(ends_only)
    _forward_ops(both)
    assert len(ends_only.ends) == len(both.ends) > 4
    assert [_without_time(e) for e in ends_only.ends] == [_without_time(e) for e in both.ends]
    forward = [e for e in ends_only.ends if e.phase == "forward"]
    assert all(e.outputs and e.output_bytes == sum(o.nbytes for o in e.outputs) and e.time_ns > 0 for e in forward)
    assert [e.op for e in both.starts if e.phase == "forward"] == [e.op for e in forward]
    assert all(e.outputs == () and e.output_bytes == 0 for e in both.starts)


def test_no_observer_never_takes_the_observed_path(monkeypatch):
    def refuse(*args):
        raise AssertionError("observed path taken without observers")

    monkeypatch.setattr(Function, "_call_observed", refuse)
    assert not hooks.ops_observed
    x = engine.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.ones((2, 2)))
