"""The allocator sees a replayed step as an eager one: the same buffers live between steps (by category), every
activation and temporary of a step released by its end, and gradients accounted as gradients."""
from __future__ import annotations

import gc

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
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before) if after.get(k, 0) != before.get(k, 0)}


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
    # what outlives the step: the four new .grad buffers (the old ones were freed) and the returned loss
    assert left.count(("gradient", "grad")) == 4
    assert [entry for entry in left if entry[0] not in ("gradient",)] == [("activation", "graph")]
    assert loss.shape == ()
