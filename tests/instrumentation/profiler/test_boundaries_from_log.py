"""Steps, optimizer steps and input waits decoded from the op log equal the hook events a plain observer sees."""
from __future__ import annotations

import numpy as np
import pytest

import engine
import instrumentation
from engine import hooks, nn
from engine.nn import functional as F
from instrumentation.format.trace import SPAN_CATEGORIES
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.profiler.recorder import Recorder
from instrumentation.profiler.spans import add_sink, remove_sink


class Oracle:
    """Keeps the step, optimizer and data-wait events as (category, name, start_ns, end_ns, step)."""

    def __init__(self) -> None:
        self.spans: list[tuple] = []
        self._optimizer_start_ns = 0

    def step_end(self, event: hooks.StepEvent) -> None:
        self.spans.append(("step", f"step {event.step}", event.time_ns - event.duration_ns, event.time_ns, event.step))

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self.spans.append(("data", "data", event.time_ns - event.wait_ns, event.time_ns, event.step))

    def optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        self._optimizer_start_ns = event.time_ns

    def optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        name = type(event.optimizer).__name__ + ".step"
        self.spans.append(("optimizer", name, self._optimizer_start_ns, event.time_ns, event.step))


def _setup():
    engine.manual_seed(0)
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    data = engine.data.Dataset.from_tensor_slices((x, y)).batch(32)
    return model, engine.optim.Adam(model.parameters(), lr=1e-3), data


def _train(model, optimizer, dataset, steps: int) -> None:
    batches = iter(dataset)
    for _ in range(steps):
        xb, yb = next(batches)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(engine.tensor(xb)), engine.tensor(yb))
        loss.backward()
        with instrumentation.span("logging", category="log"):
            pass
        optimizer.step()
    batches.close()


@pytest.fixture(autouse=True)
def fresh_steps():
    hooks.reset_step(0)
    yield
    hooks.reset_step(0)


def test_two_recorders_decode_the_oracles_spans():
    model, optimizer, dataset = _setup()
    oracle = hooks.subscribe(Oracle())
    from_log, from_observers = Recorder(), Recorder(with_stack=True)  # the second also keeps stacks
    try:
        for recorder in (from_log, from_observers):
            recorder.start()
            add_sink(recorder)  # as profile() does: span() records into every sink
        assert from_log.log in hooks.recorders and from_observers.log in hooks.recorders
        _train(model, optimizer, dataset, 3)
    finally:
        for recorder in (from_observers, from_log):
            remove_sink(recorder)
            recorder.stop()
        hooks.unsubscribe(oracle)
    boundary = [s for s in from_log.spans if s[0] != "log"]
    assert boundary == sorted(oracle.spans, key=lambda s: s[2]) and len(boundary) == 9
    assert from_observers.spans == from_log.spans
    assert [s[1] for s in from_log.spans if s[0] == "log"] == ["logging"] * 3
    assert [s[1] for s in boundary if s[0] == "optimizer"] == ["Adam.step"] * 3
    assert from_log.op_count == from_observers.op_count == len(from_log.ops) > 0


def test_a_recorder_started_mid_step_keeps_the_ops_but_not_the_step():
    model, optimizer, dataset = _setup()
    oracle = hooks.subscribe(Oracle())
    recorder = Recorder()
    try:
        hooks.mark_step_begin()
        recorder.start()
        _train(model, optimizer, dataset, 2)
    finally:
        recorder.stop()
        hooks.unsubscribe(oracle)
    steps = [s for s in recorder.spans if s[0] == "step"]
    assert [s[1] for s in oracle.spans if s[0] == "step"] == ["step 0", "step 1"]
    assert steps == [s for s in oracle.spans if s[0] == "step"][1:]
    assert {op.step for op in recorder.ops} == {0, 1}


def test_scheduled_cycles_hold_exactly_their_steps_and_spans(tmp_path):
    model, optimizer, dataset = _setup()
    oracle = hooks.subscribe(Oracle())
    traces: list[dict] = []
    try:
        schedule = instrumentation.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
        with instrumentation.profile(schedule=schedule, on_trace_ready=lambda p: traces.append(p.last_trace)):
            _train(model, optimizer, dataset, 12)
    finally:
        hooks.unsubscribe(oracle)
    assert [trace["metadata"]["steps"] for trace in traces] == [[3, 4], [7, 8]]
    for trace, steps in zip(traces, ([3, 4], [7, 8])):
        columns = columns_from_trace(trace)
        spans = columns.spans
        expected = sorted((s for s in oracle.spans if s[4] in steps), key=lambda s: s[2])
        kinds = [SPAN_CATEGORIES[c] for c in spans.category]
        got = [i for i in np.argsort(spans.ts_us, kind="stable") if kinds[i] in ("step", "data", "optimizer")]
        assert [(kinds[i], spans.name[i], int(spans.step[i])) for i in got] == \
            [(s[0], s[1], s[4]) for s in expected]
        assert [spans.dur_us[i] for i in got] == pytest.approx([(s[3] - s[2]) / 1e3 for s in expected], abs=1e-6)
        first = expected[0][2]
        assert [spans.ts_us[i] - spans.ts_us[got[0]] for i in got] == \
            pytest.approx([(s[2] - first) / 1e3 for s in expected], abs=1e-3)
        assert set(columns.ops.step.tolist()) == set(steps)


def test_without_a_schedule_the_profiler_adds_only_its_log():
    model, optimizer, dataset = _setup()
    with instrumentation.profile() as prof:
        assert [type(r).__name__ for r in hooks.observers()] == ["OpLog"]
        _train(model, optimizer, dataset, 3)
        prof.step()  # after an engine step: ignored
    assert prof.last_trace["metadata"]["steps"] == [0, 1, 2]
    assert not hooks.recorders
    with instrumentation.profile(schedule=instrumentation.schedule(wait=0, warmup=0, active=1)) as prof:
        assert hooks.observers() == (prof._recorder.log, prof)  # recording from the first step; the log first
