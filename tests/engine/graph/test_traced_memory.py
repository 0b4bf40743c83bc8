"""The allocator sees a replayed step as an eager one: the same buffers live between steps (by category), every
activation and temporary of a step released by its end, and gradients accounted as gradients."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from engine import hooks, memory
from tests.engine.graph.digits_step import batches, make
import engine


class Allocations(hooks.Recorder):
    def __init__(self):
        self.live: dict[int, tuple[str, str]] = {}

    def buffer_alloc(self, buffer_id, nbytes, device, category, op, shape, dtype):
        self.live[buffer_id] = (category, op)

    def buffer_free(self, buffer_id, nbytes, device, category, op):
        self.live.pop(buffer_id, None)


def categories_after(traced: bool, steps: int = 4) -> dict[str, int]:
    gc.collect()
    before = memory.category_bytes()
    _, _, step = make("mlp")
    run = engine.function(step) if traced else step
    for x, y in batches(steps):
        run(x, y)
    del x, y
    gc.collect()
    after = memory.category_bytes()
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)
            if after.get(k, 0) != before.get(k, 0)}


def test_buffers_between_steps_match_eager_by_category():
    eager = categories_after(False)
    traced = categories_after(True)
    assert traced == eager
    assert set(traced) == {"parameter", "gradient", "optimizer_state"}


def test_a_replayed_step_frees_its_activations_and_temporaries():
    _, _, step = make("mlp")
    traced = engine.function(step)
    data = list(batches(3))
    traced(*data[0])
    recorder = hooks.add_recorder(Allocations())
    try:
        loss = traced(*data[1])
    finally:
        hooks.remove_recorder(recorder)
    left = sorted(recorder.live.values())
    # what outlives the step: the four new .grad buffers (the old ones were freed) and the returned loss (registered
    # once, by its op's name, as eager's loss)
    assert left.count(("gradient", "grad")) == 4
    assert [entry for entry in left if entry[0] not in ("gradient",)] == [("activation", "CrossEntropy")]
    assert loss.shape == ()


def step_peak_bytes(run, data) -> int:
    worst = 0
    for x, y in data:
        start = memory.allocated_bytes()
        memory.reset_peak()
        run(x, y)
        worst = max(worst, memory.stats().peak_bytes - start)
    return worst


def test_memory_planning_lowers_the_step_peak_of_the_mlp_and_cnn():
    for kind, limit in (("mlp", 0.8), ("cnn", 0.8)):
        data = list(batches(4, batch=64))
        _, _, eager = make(kind)
        _, _, step = make(kind)
        traced = engine.function(step)
        unplanned = engine.function(make(kind)[2], passes=[])
        for run in (eager, traced, unplanned):
            run(*data[0])  # the first call traces: measure replays
        eager_peak = step_peak_bytes(eager, data)
        traced_peak = step_peak_bytes(traced, data)
        assert traced_peak <= limit * eager_peak, (kind, traced_peak, eager_peak)
        assert step_peak_bytes(unplanned, data) > traced_peak


def test_a_forward_hook_sees_the_relu_input_the_in_place_relu_would_overwrite():
    model, _, step = make("mlp")
    traced = engine.function(step)
    data = list(batches(3))
    traced(*data[0])
    seen = []
    handle = model[1].register_forward_hook(lambda module, inputs, output: seen.append(
        (inputs[0].numpy().copy(), output.numpy().copy())))
    traced(*data[1])
    handle.remove()
    [(relu_input, relu_output)] = seen
    assert relu_input.min() < 0 and np.array_equal(relu_output, np.maximum(relu_input, 0))
    eager_model, _, eager_step = make("mlp")
    for x, y in data:
        eager_step(x, y)
    traced(*data[2])  # in place again once the hook is gone; the same bits as eager
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.parameters(), eager_model.parameters()))


def test_a_replay_that_raises_releases_what_it_registered():
    model, _, step = make("mlp")
    traced = engine.function(step)
    data = list(batches(2))
    traced(*data[0])
    x, y = data[1]
    bad = engine.tensor(np.where(np.arange(len(y)) == 3, 10, y.numpy()))  # class 10 of 10: refused after the forward
    gc.collect()
    before = memory.allocated_bytes()
    grads = sum(p.grad.numpy().nbytes for p in model.parameters())
    with pytest.raises(IndexError, match="target labels"):
        traced(x, bad)
    gc.collect()
    # as eager: zero_grad dropped the gradients before the loss refused the labels; nothing of the forward is left
    assert memory.allocated_bytes() == before - grads and hooks.current_phase() == "forward"
    traced(x, y)  # and the next replay runs
