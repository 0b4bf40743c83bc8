"""Step numbering does not depend on what observes: a hand-written loop sees the same ``current_step``,
``step_of_record`` and ``step_is_open`` at each point with no recorder and with each kind of recorder attached."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pytest

import engine
from engine import hooks, nn
from engine.nn import functional as F
from engine.op_log import OpLog


class _Allocations:
    """A bare memory recorder: counts the allocator's registrations."""

    def __init__(self) -> None:
        self.count = 0

    def buffer_alloc(self, *args: Any) -> None:
        self.count += 1


@contextmanager
def _nothing(tmp_path) -> Iterator[Any]:
    yield None


@contextmanager
def _recorder(recorder: Any) -> Iterator[Any]:
    hooks.add_recorder(recorder)
    try:
        yield recorder
    finally:
        hooks.remove_recorder(recorder)


@contextmanager
def _op_log(tmp_path) -> Iterator[Any]:
    with _recorder(OpLog()) as log:
        yield log


@contextmanager
def _memory_recorder(tmp_path) -> Iterator[Any]:
    with _recorder(_Allocations()) as allocations:
        yield allocations


@contextmanager
def _profiler(tmp_path) -> Iterator[Any]:
    import instrumentation
    with instrumentation.profile() as prof:
        yield prof


@contextmanager
def _memory_tracker(tmp_path) -> Iterator[Any]:
    from instrumentation import MemoryTracker, SummaryWriter
    writer = SummaryWriter(tmp_path / "tracker")
    tracker = MemoryTracker(writer)
    try:
        yield tracker
    finally:
        tracker.close()
        writer.close()


@contextmanager
def _watch(tmp_path, model: nn.Module) -> Iterator[Any]:
    from instrumentation import SummaryWriter, watch
    writer = SummaryWriter(tmp_path / "watch")
    handle = watch(model, writer, every=1)
    try:
        yield handle
    finally:
        handle.close()
        writer.close()


def _where() -> tuple[int, int, bool]:
    return hooks.current_step(), hooks.step_of_record(), hooks.step_is_open()


def _hand_loop(attach, tmp_path, steps: int = 3) -> list[tuple[str, tuple[int, int, bool]]]:
    """Forward, backward and optimizer.step by hand (no data pipeline, no fit: nothing else opens a step)."""
    hooks.reset_step(0)
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = engine.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    y = engine.tensor(rng.integers(0, 3, 8))
    seen = [("before", _where())]
    with (attach(tmp_path, model) if attach is _watch else attach(tmp_path)):
        for _ in range(steps):
            optimizer.zero_grad()
            seen.append(("zero_grad", _where()))
            loss = F.cross_entropy(model(x), y)
            seen.append(("forward", _where()))
            loss.backward()
            seen.append(("backward", _where()))
            optimizer.step()
            seen.append(("optimizer.step", _where()))
    hooks.reset_step(0)
    return seen


ATTACHED = {"op recorder": _op_log, "memory recorder": _memory_recorder, "profiler": _profiler,
            "memory tracker": _memory_tracker, "watch": _watch}


@pytest.mark.parametrize("kind", list(ATTACHED))
def test_a_hand_loop_numbers_its_steps_the_same_with_and_without_each_recorder(kind, tmp_path) -> None:
    plain = _hand_loop(_nothing, tmp_path)
    assert plain == _hand_loop(ATTACHED[kind], tmp_path), kind


def test_the_first_forward_op_opens_the_step_that_the_optimizer_closes(tmp_path) -> None:
    steps = _hand_loop(_nothing, tmp_path)
    assert steps[0] == ("before", (0, 0, False))
    by_step = [steps[i:i + 4] for i in range(1, len(steps), 4)]
    for index, ((_, zeroed), (_, forward), (_, backward), (_, stepped)) in enumerate(by_step):
        assert zeroed == (index, max(index - 1, 0), False)  # zero_grad runs no op: the last step is still the record's
        assert forward == backward == (index, index, True)  # a value logged after the forward is this step's
        assert stepped == (index + 1, index, False)


@pytest.mark.parametrize("attach", [_nothing, _op_log], ids=["no recorder", "op recorder"])
def test_a_replayed_graph_opens_its_step_like_eager_ops(attach, tmp_path) -> None:
    """A traced forward (no optimizer inside) run after a step ended: the replay opens the next step, observed or
    not, as the eager ops it replays would."""
    hooks.reset_step(0)
    model = nn.Linear(4, 2)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    forward = engine.function(lambda x: model(x).sum())
    x = engine.tensor(np.ones((3, 4), np.float32))
    seen = []
    with attach(tmp_path):
        for _ in range(3):  # the trace, then two replays
            optimizer.step()  # ends the step (no gradients: nothing to update)
            seen.append(_where())
            forward(x)
            seen.append(_where())
    hooks.reset_step(0)
    assert seen == [(1, 0, False), (1, 1, True), (2, 1, False), (2, 2, True), (3, 2, False), (3, 3, True)]
