"""Communication in a capture: collectives on their own lane (thread name "communication", cat "comm", bytes and
bucket in args), the bucket wait as a span on the training thread's lane, the rank in the metadata."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks
from instrumentation.format import trace as fmt
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.profiler.export import build_trace
from instrumentation.profiler.recorder import Recorder
from tests.instrumentation.distributed.fake_distributed import FakeDistributed


def recorded_step(recorder: Recorder) -> int:
    """One engine step recorded; returns its start (ns)."""
    model = engine.nn.Linear(4, 2)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    hooks.reset_step(0)
    recorder.start()
    try:
        hooks.mark_step_begin()
        started = hooks._step_start_ns
        model(engine.tensor(np.ones((3, 4), np.float32))).sum().backward()
        optimizer.step()
    finally:
        recorder.stop()
    return started


def test_collectives_have_their_own_lane_and_the_wait_is_on_the_training_thread(monkeypatch) -> None:
    monkeypatch.setenv("RANK", "5")  # a launcher's variable: used when engine.distributed is not initialised
    monkeypatch.delattr(engine, "distributed", raising=False)
    recorder = Recorder(record_shapes=True, profile_memory=False)
    start = recorded_step(recorder)
    # what the engine's communication/comm_wait recorder methods keep (engine.hooks.CommEvent's fields)
    recorder.comm.extend([("allreduce", 1, 4096, start + 1000, start + 9000, 0),
                          ("allreduce", 0, 1024, start + 4000, start + 12000, 0)])
    recorder.comm_waits.append((0, start + 10000, start + 12500, 5120, 2))
    trace = build_trace(recorder)
    events = trace["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert lanes[fmt.TID_COMM] == fmt.COMM_LANE_NAME == "communication"
    comm = [e for e in events if e.get("cat") == fmt.CAT_COMM]
    assert [(e["name"], e["tid"], e["args"]) for e in comm] == [
        ("allreduce", fmt.TID_COMM, {fmt.ARG_STEP: 0, fmt.ARG_BYTES: 4096, fmt.ARG_BUCKET: 1}),
        ("allreduce", fmt.TID_COMM, {fmt.ARG_STEP: 0, fmt.ARG_BYTES: 1024, fmt.ARG_BUCKET: 0})]
    assert [e["dur"] for e in comm] == [8.0, 8.0]
    assert comm[1]["ts"] - comm[0]["ts"] == pytest.approx(3.0, abs=1e-6)  # µs from ns: the clock's value rounds
    (wait,) = [e for e in events if e.get("cat") == fmt.CAT_COMM_WAIT]
    assert (wait["tid"], wait["dur"], wait["args"]) == (fmt.TID_HOST, 2.5, {fmt.ARG_STEP: 0, fmt.ARG_BYTES: 5120,
                                                                            fmt.ARG_BUCKETS: 2})
    assert trace["metadata"]["rank"] == 5
    # the board's columns hold them as spans of their categories, in the step
    spans = columns_from_trace(trace).spans
    assert spans.step[spans.of(fmt.CAT_COMM)].tolist() == [0, 0]
    assert spans.dur_us[spans.of(fmt.CAT_COMM_WAIT)].tolist() == [2.5]


def test_a_capture_without_communication_has_no_comm_lane() -> None:
    recorder = Recorder(record_shapes=False, profile_memory=False)
    recorded_step(recorder)
    events = build_trace(recorder)["traceEvents"]
    assert not [e for e in events if e.get("tid") == fmt.TID_COMM or e.get("cat") in (fmt.CAT_COMM, fmt.CAT_COMM_WAIT)]


def test_while_recording_in_a_job_the_engines_communication_events_are_kept(monkeypatch) -> None:
    monkeypatch.setattr(engine, "distributed", FakeDistributed(1, 2), raising=False)
    recorder = Recorder(record_shapes=False, profile_memory=False)
    recorder.start()
    try:
        hooks.emit(hooks.communication, hooks.CommEvent("allreduce", 0, 256, 10, 20, 3))
        hooks.emit(hooks.comm_wait, hooks.CommWaitEvent(3, 15, 7, 256, 1))
    finally:
        recorder.stop()
    hooks.emit(hooks.communication, hooks.CommEvent("allreduce", 1, 8, 30, 40, 4))  # not recording any more
    assert recorder.comm == [("allreduce", 0, 256, 10, 20, 3)]
    assert recorder.comm_waits == [(3, 15, 22, 256, 1)]
    assert build_trace(recorder)["metadata"]["rank"] == 1
