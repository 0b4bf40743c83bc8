"""engine.memory_recording's recorders (site recorders, history rings) against an independent alloc/free observer;
end_step_peak/take_peak_capture shared by several readers of one step boundary."""
from __future__ import annotations

import gc
import itertools
from collections import deque

import numpy as np
import pytest

import engine
from engine import autograd, hooks, memory
from engine import memory_recording as recording
from engine.memory_recording import HistoryRing, SiteRecorder


class _Observer:
    """The oracle: every alloc/free event as the hook contract delivers it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str, int, str]] = []
        self.alloc_ids: list[int] = []
        self.ops: dict[int, str] = {}

    def alloc(self, event: hooks.MemoryEvent) -> None:
        self.ops[event.buffer_id] = event.op
        self.alloc_ids.append(event.buffer_id)
        self.events.append(("alloc", event.bytes, event.op, event.step, event.device))

    def free(self, event: hooks.MemoryEvent) -> None:
        self.events.append(("free", event.bytes, self.ops.pop(event.buffer_id, "?"), event.step, event.device))


@pytest.fixture()
def observer():
    gc.collect()
    hooks.reset_step(3)
    seen = hooks.subscribe(_Observer())
    yield seen
    hooks.unsubscribe(seen)
    hooks.reset_step(0)


def _work() -> list[engine.Tensor]:
    """A few allocations and frees: inputs, activations, a view, a backward pass, a step boundary."""
    x = engine.tensor(np.ones((4, 5), np.float32), requires_grad=True)
    y = (x * 2.0).relu()
    view = y.reshape(20)
    hooks.mark_step_end()
    loss = (y * y).sum()
    loss.backward()
    return [x, view]


def test_history_rings_record_what_an_observer_sees(observer) -> None:
    first, second = deque(maxlen=10_000), deque(maxlen=3)
    rings = [hooks.add_recorder(HistoryRing(first)), hooks.add_recorder(HistoryRing(second))]
    try:
        kept = _work()
        del kept
    finally:
        for ring in rings:
            hooks.remove_recorder(ring)
    rows = [(action, nbytes, op, step, device) for _, action, nbytes, op, step, device in first]
    assert rows == observer.events and {"alloc", "free"} <= {r[0] for r in rows} and {3, 4} <= {r[3] for r in rows}
    # every ring sees every record (each reads its own clock); a bounded one keeps the last
    assert [row[1:] for row in second] == [row[1:] for row in list(first)[-3:]]
    times = [row[0] for row in first]
    assert times == sorted(times) and all(t > 0 for t in times)
    engine.tensor(np.ones(3, np.float32))
    assert len(first) == len(rows)  # removed: nothing appended any more


def test_site_recorder_is_called_once_per_new_buffer_and_once_per_backward(observer, monkeypatch) -> None:
    counter = itertools.count()
    recorder = lambda: ("site", next(counter))  # noqa: E731
    in_backward: list[int] = []  # buffers allocated by each backward() call

    def backward(*args: object, **kwargs: object) -> None:
        before = len(observer.alloc_ids)
        real_backward(*args, **kwargs)
        in_backward.append(len(observer.alloc_ids) - before)

    real_backward = autograd.backward
    monkeypatch.setattr(autograd, "backward", backward)
    site_recorder = hooks.add_recorder(SiteRecorder(recorder))
    try:
        kept = _work()
        blocks = {b.buffer_id: b for b in memory.live_blocks()}
        groups = memory.live_groups(sites=True)
    finally:
        hooks.remove_recorder(site_recorder)
    assert len(in_backward) == 1 and in_backward[0] > 1
    # views share their buffer: no call for them; backward() asks once for all of its buffers (its site scope)
    assert next(counter) == len(observer.alloc_ids) - in_backward[0] + 1
    order = {buffer_id: index for index, buffer_id in enumerate(observer.alloc_ids)}
    for tensor in kept:
        assert blocks[tensor._mem_key].site == ("site", order[tensor._mem_key])
    x = kept[0]
    key = ("cpu", ("site", order[x._mem_key]), "tensor", "", (4, 5), "float32", "input")
    assert groups[key] == (80, 1)
    plain = memory.live_groups()
    assert sum(v[0] for v in plain.values()) == sum(v[0] for v in groups.values()) == memory.allocated_bytes("cpu")
    assert engine.tensor(np.ones(2, np.float32))._mem_key not in blocks  # removed: later buffers get None
    assert all(b.site is None for b in memory.live_blocks() if b.buffer_id not in blocks)
    del kept, x


def test_the_first_recorder_is_called_and_a_failing_one_is_reported_once(observer, capsys) -> None:
    def broken() -> tuple:
        raise RuntimeError("boom")

    first, second = hooks.add_recorder(SiteRecorder(broken)), hooks.add_recorder(SiteRecorder(lambda: "second"))
    try:
        a, b = engine.tensor(np.ones(2, np.float32)), engine.tensor(np.ones(3, np.float32))  # allocations still work
        sites = {blk.buffer_id: blk.site for blk in memory.live_blocks()}
        assert sites[a._mem_key] is None and sites[b._mem_key] is None
        hooks.remove_recorder(first)
        c = engine.tensor(np.ones(4, np.float32))
        assert {blk.buffer_id: blk.site for blk in memory.live_blocks()}[c._mem_key] == "second"
    finally:
        hooks.remove_recorder(first)
        hooks.remove_recorder(second)
    err = capsys.readouterr().err
    assert err.count("SiteRecorder.allocation_site failed") == 1 and "RuntimeError: boom" in err
    del a, b, c


def test_readers_of_one_step_boundary_share_its_step_peak_and_capture() -> None:
    gc.collect()
    memory.reset_step_peak("cpu")
    recording.arm_peak_capture("cpu", memory.allocated_bytes("cpu") + 1)
    a = engine.tensor(np.ones(1000, np.float32))
    del a
    expected_peak = memory.step_peak("cpu")
    first, second = memory.end_step_peak("cpu", step=41), memory.end_step_peak("cpu", step=41)
    assert first == second and first[1] == expected_peak.bytes and first[2] == expected_peak.by_category
    first[2]["input"] = -1  # each reader's dicts are its own
    assert memory.end_step_peak("cpu", step=41)[2] == expected_peak.by_category
    capture = recording.take_peak_capture("cpu", step=41)
    assert capture is not None and capture.bytes == expected_peak.bytes
    assert recording.take_peak_capture("cpu", step=41) is capture
    assert recording.take_peak_capture("cpu", step=42) is None  # taken: the next step has none
    b = engine.tensor(np.ones(10, np.float32))
    allocated, peak, _, _ = memory.end_step_peak("cpu", step=42)  # a new step: a new peak, then a reset
    assert peak == allocated == memory.allocated_bytes("cpu") and memory.step_peak("cpu").bytes == allocated
    recording.arm_peak_capture("cpu", None)
    del b
