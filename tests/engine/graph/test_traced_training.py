"""engine.function on the digits MLP and CNN: the traced step gives the eager step's losses and parameters bit for
bit (no pass reorders arithmetic), with every pass and with none."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from tests.engine.graph.digits_step import batches, make


@pytest.mark.parametrize("kind,optimizer,steps", [("mlp", "sgd", 100), ("mlp", "adam", 100), ("cnn", "sgd", 100)])
def test_traced_step_matches_eager_bit_for_bit(kind, optimizer, steps):
    eager_model, _, eager_step = make(kind, optimizer)
    traced_model, _, step = make(kind, optimizer)
    traced = engine.function(step)
    eager_losses = [eager_step(x, y).item() for x, y in batches(steps)]
    traced_losses = [traced(x, y).item() for x, y in batches(steps)]
    assert traced.trace_count == 1
    assert traced_losses == eager_losses
    for a, b in zip(eager_model.parameters(), traced_model.parameters()):
        assert np.array_equal(a.numpy(), b.numpy())
        assert np.array_equal(a.grad.numpy(), b.grad.numpy())


def test_no_pass_and_all_passes_agree():
    results = []
    for passes in ([], None):
        model, _, step = make("mlp")
        traced = engine.function(step, passes=passes)
        results.append([traced(x, y).item() for x, y in batches(10)])
    assert results[0] == results[1]


def test_replay_returns_live_results_not_the_traced_ones():
    _, _, step = make("mlp")
    traced = engine.function(step)
    losses = [traced(x, y) for x, y in batches(3)]
    values = [loss.item() for loss in losses]
    assert len(set(values)) == 3  # each replay's own loss, kept after later replays
    assert losses[1]._data is not losses[2]._data


def test_python_side_effects_run_only_while_tracing():
    _, _, step = make("mlp")
    calls = []

    def counted(x, y):
        calls.append(1)
        return step(x, y)

    traced = engine.function(counted)
    for x, y in batches(4):
        traced(x, y)
    assert len(calls) == 1


def test_graph_records_phases_modules_and_backward_links():
    _, _, step = make("mlp")
    traced = engine.function(step, passes=[])
    x, y = next(batches(1))
    traced(x, y)
    graph = traced.graphs()[0][0]
    phases = {n.phase for n in graph.nodes}
    assert {"forward", "backward", "optimizer"} <= phases
    ops = [n.op for n in graph.nodes]
    assert ops.count("Linear") == 2 and "LinearBackward" in ops and "SGDStep" in ops and ops[0] == "ZeroGrad"
    linear = [n for n in graph.nodes if n.op == "Linear"]
    assert [n.module for n in linear] == ["0", "2"]
    assert all(n.ctx in {m.id for m in graph.nodes} for n in graph.nodes if n.kind == "backward")
    assert linear[0].shapes == [(32, 128)] and linear[0].dtypes == ["float32"]
