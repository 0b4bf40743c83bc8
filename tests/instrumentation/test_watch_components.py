"""watch() also starts the memory tracker and answers capture requests; close() detaches all of it."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks, nn
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.format import EventFileReader, is_event_file
from instrumentation.format import trace as fmt


def train(model, optimizer, steps: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, 16, 8)).astype(np.float32)
    y = rng.integers(0, 3, (steps, 16))
    for i in range(steps):
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(engine.tensor(x[i])), engine.tensor(y[i])).backward()
        optimizer.step()


def scalar_tags(run_dir) -> set[str]:
    tags = set()
    for path in run_dir.iterdir():
        if is_event_file(path.name):
            tags |= {v.tag for event in EventFileReader(str(path)).read() for v in event.values}
    return tags


def test_watch_tracks_memory_and_answers_a_capture_request(tmp_path):
    engine.manual_seed(0)
    hooks.reset_step()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    before = set(hooks.observers())
    with SummaryWriter(tmp_path) as writer:
        handle = watch(model, writer, capture_requests=True)
        fmt.write_capture_request(tmp_path, 3)  # what the board's Capture button writes
        for _ in range(40):
            train(model, optimizer, 5)
            if fmt.read_capture_status(tmp_path).state == "done":
                break
        handle.close()
    assert set(hooks.observers()) == before  # tracker, capture and watch itself all detached
    status = fmt.read_capture_status(tmp_path)
    assert status.state == "done" and status.steps == 3
    assert {"mem/cpu/allocated_bytes", "mem/cpu/peak_bytes", "update_ratio/0.weight"} <= scalar_tags(tmp_path)


def test_watch_without_components_subscribes_only_itself(tmp_path):
    model = nn.Sequential(nn.Linear(4, 2))
    before = len(hooks.observers())
    with SummaryWriter(tmp_path) as writer:
        handle = watch(model, writer, memory=False, capture_requests=False)
        added = hooks.observers()[before:]
        # the handle, and its sampler while a sampled step is armed (the first step is)
        assert [type(o).__name__ for o in added] == ["Watch", "_Sampler"] and added[0] is handle
        handle.close()
    assert len(hooks.observers()) == before
