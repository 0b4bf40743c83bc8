"""On-demand capture from a training thread, and the input_bound alert from a deliberately slow map()."""
from __future__ import annotations

import threading
import time

import numpy as np

import engine
import instrumentation
from engine import nn
from engine.nn import functional as F
from instrumentation.format import trace as fmt
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.trace_columns import columns_from_trace
from instrumentation.profiler.input_bound import InputBoundDetector


def digits(slow_map_s: float = 0.0) -> tuple[nn.Module, engine.optim.Optimizer, engine.data.Dataset]:
    engine.manual_seed(0)
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    dataset = engine.data.Dataset.from_tensor_slices((x, y))
    if slow_map_s:
        dataset = dataset.map(lambda a, b: (time.sleep(slow_map_s), (a, b))[1])
    return model, engine.optim.SGD(model.parameters(), lr=0.1), dataset.batch(16).repeat()


def run_steps(model, optimizer, dataset, stop: threading.Event | None = None, steps: int = 10**9) -> int:
    done = 0
    for xb, yb in dataset:
        optimizer.zero_grad()
        F.cross_entropy(model(engine.tensor(xb)), engine.tensor(yb)).backward()
        optimizer.step()
        done += 1
        if done >= steps or (stop is not None and stop.is_set()):
            return done
    return done


def test_capture_request_round_trip_with_a_training_thread(tmp_path) -> None:
    model, optimizer, dataset = digits()
    stop = threading.Event()
    capture = instrumentation.OnDemandCapture(tmp_path, check_interval_ms=20)
    outcome: list[int] = []

    def training() -> None:  # NOTE: hook state is per process; the training thread owns it while this runs
        capture.start()
        try:
            outcome.append(run_steps(model, optimizer, dataset, stop))
        finally:
            capture.close()

    thread = threading.Thread(target=training)
    thread.start()
    try:
        time.sleep(0.2)
        assert capture.captures == [] and fmt.read_capture_status(tmp_path).state == "none"
        request = fmt.write_capture_request(tmp_path, 4)  # what the board's Capture button does
        deadline = time.monotonic() + 60
        while fmt.read_capture_status(tmp_path).state != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(60)
    status = fmt.read_capture_status(tmp_path)
    assert (status.state, status.request_id, status.steps) == ("done", request.request_id, 4)
    assert fmt.is_capture_id(status.capture_id)
    files = sorted((tmp_path / fmt.PROFILE_RELDIR / status.capture_id).iterdir())  # the trace and its sidecar
    assert len(files) == 2 and fmt.is_trace_file(files[1].name) and files[0].name.endswith(".columns.npz")
    columns = columns_from_trace(fmt.read_trace(files[1]))
    steps = columns.spans.step[columns.spans.of("step")]
    assert len(steps) == 4 and np.array_equal(np.diff(steps), [1, 1, 1])
    assert set(np.unique(columns.ops.step)) == set(steps.tolist())  # no op of a step outside the capture
    remaining = sorted(p.name for p in (tmp_path / fmt.PROFILE_RELDIR).iterdir() if not p.is_dir())
    assert remaining == [fmt.CAPTURE_DONE_NAME] and outcome[0] > 4


def test_an_invalid_request_is_answered_failed_and_training_goes_on(tmp_path) -> None:
    model, optimizer, dataset = digits()
    (tmp_path / fmt.PROFILE_RELDIR).mkdir(parents=True)
    (tmp_path / fmt.PROFILE_RELDIR / fmt.CAPTURE_REQUEST_NAME).write_text('{"steps": 0}')
    capture = instrumentation.OnDemandCapture(tmp_path, check_interval_ms=0).start()
    try:
        assert run_steps(model, optimizer, dataset, steps=3) == 3
    finally:
        capture.close()
    status = fmt.read_capture_status(tmp_path)
    assert status.state == "failed" and "'steps' must be an integer" in status.message


def test_slow_map_raises_input_bound_with_evidence(tmp_path) -> None:
    model, optimizer, dataset = digits(slow_map_s=0.002)  # 16 rows x 2 ms = 32 ms of input per step
    detector = InputBoundDetector(tmp_path, window_steps=5).start()
    try:
        run_steps(model, optimizer, dataset, steps=12)
    finally:
        detector.stop()
    alerts = AlertReader(tmp_path / ALERTS_RELPATH).read()
    assert [a.kind for a in alerts] == ["input_bound"]  # one, then the cooldown
    evidence = alerts[0].evidence
    assert evidence["data_wait_share"] > 0.3 and evidence["steps"] == 5 and evidence["threshold"] == 0.3
    assert evidence["data_wait_ms"] >= 5 * 16 * 2.0 * 0.9


def test_fast_input_raises_nothing(tmp_path) -> None:
    _, _, dataset = digits()
    # NOTE: a step that does real work next to a cheap in-memory pipeline; with a tiny model the fetch of a
    # batch is itself a large share of the step (that is input-bound), and load on the machine shifts it.
    model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.01)
    with instrumentation.profile(tmp_path, schedule=instrumentation.schedule(wait=100, warmup=0, active=1)):
        run_steps(model, optimizer, dataset, steps=30)
    assert AlertReader(tmp_path / ALERTS_RELPATH).read() == []
