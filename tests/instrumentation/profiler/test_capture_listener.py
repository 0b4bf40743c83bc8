"""OnDemandCapture says that it listens: the listener file exists while started, its modification time (the
heartbeat) moves at each request check, and it is gone once the last listener of the run closes."""
from __future__ import annotations

import os
import socket

import numpy as np

import engine
from engine import nn
from engine.nn import functional as F
from instrumentation.format.capture_listener import listener_path, read_listener
from instrumentation.profiler import OnDemandCapture


def _step(model, optimizer, x, y) -> None:
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()


def test_listener_file_lives_as_long_as_the_capture_and_carries_a_heartbeat(tmp_path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 2))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    x, y = engine.tensor(np.ones((2, 4), np.float32)), engine.tensor(np.array([0, 1]))
    assert read_listener(run_dir) is None
    first = OnDemandCapture(run_dir, check_interval_ms=0).start()
    second = OnDemandCapture(run_dir, check_interval_ms=0).start()  # e.g. watch() and profile(on_demand=True)
    try:
        listener = read_listener(run_dir)
        assert (listener.pid, listener.host) == (os.getpid(), socket.gethostname())
        os.utime(listener_path(run_dir), (1.0, 1.0))  # as if last heard long ago
        _step(model, optimizer, x, y)  # a step boundary: a request check, and the heartbeat
        assert read_listener(run_dir).heartbeat > 1.0
        os.remove(listener_path(run_dir))  # removed by hand: the next check writes it again
        _step(model, optimizer, x, y)
        assert read_listener(run_dir).pid == os.getpid()
        first.close()
        assert read_listener(run_dir) is not None  # the other one still listens
    finally:
        first.close()
        second.close()
    assert read_listener(run_dir) is None
    assert not os.path.exists(listener_path(run_dir))
