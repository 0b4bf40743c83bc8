"""nonfinite/<param>/<stat>: per-parameter NaN/Inf counts are written where they are not zero, so the first point
of a parameter's series is the step where NaN/Inf reached it."""
from __future__ import annotations

import math

import numpy as np

import engine
from engine import hooks
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.dynamics.nonfinite_counts import NonfiniteCounts
from instrumentation.dynamics.parameters import ParameterStats
from instrumentation.format.tags import NONFINITE, NONFINITE_STATS, nonfinite_tag

from dynamics_helpers import mlp, read_scalars


def stats(step: int, counts: dict[str, tuple[int, int, int, int]]) -> ParameterStats:
    names = tuple(counts)
    column = [[counts[name][k] for name in names] for k in range(4)]
    floats = [1.0] * len(names)
    return ParameterStats(step, names, floats, floats, floats, floats, floats, floats, floats, floats, *column)


def test_counts_are_written_while_not_zero_and_once_when_back_to_zero():
    log = NonfiniteCounts()
    zero = (0, 0, 0, 0)
    assert log.scalars(stats(0, {"a": zero, "b": zero})) == ([], [])
    tags, values = log.scalars(stats(1, {"a": zero, "b": (2, 0, 0, 0)}))
    assert tags == [nonfinite_tag("b", stat) for stat in NONFINITE_STATS] and values == [2.0, 0.0, 0.0, 0.0]
    tags, values = log.scalars(stats(2, {"a": (0, 1, 0, 0), "b": (0, 0, 5, 3)}))
    assert tags[:4] == [nonfinite_tag("a", stat) for stat in NONFINITE_STATS] and values == [0, 1, 0, 0, 0, 0, 5, 3]
    tags, values = log.scalars(stats(3, {"a": zero, "b": (0, 0, 1, 0)}))  # a recovered: its zeros, once
    assert [tag.split("/")[1] for tag in tags] == ["a"] * 4 + ["b"] * 4 and values == [0, 0, 0, 0, 0, 0, 1, 0]
    tags, _ = log.scalars(stats(4, {"a": zero, "b": zero}))
    assert {tag.split("/")[1] for tag in tags} == {"b"}
    assert log.scalars(stats(5, {"a": zero, "b": zero})) == ([], [])


def test_watch_names_the_parameter_and_step_where_a_nan_gradient_starts(digits, tmp_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = mlp(16)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer, \
            watch(model, writer, memory=False, capture_requests=False) as handle:
        for step in range(5):
            batch = slice(step * 32, (step + 1) * 32)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(x[batch])), engine.tensor(y[batch]))
            loss.backward()
            if step == 2:
                model[2].weight.grad.numpy()[1, 3] = np.nan  # one NaN in the last layer's gradient
            optimizer.step()
            handle.log_loss(loss.item())
    scalars = read_scalars(tmp_path / "run")
    counts = {tag: values for tag, values in scalars.items() if tag.startswith(NONFINITE)}
    first = min(step for values in counts.values() for step in values)
    assert first == 2
    at_first = {tag: values[2] for tag, values in counts.items() if 2 in values}
    assert at_first == {nonfinite_tag("2.weight", stat): value for stat, value in zip(NONFINITE_STATS, (1, 0, 0, 0))}
    assert counts[nonfinite_tag("2.weight", "weight_nan_count")][3] == 1  # the update put the NaN into the weight
    assert math.isfinite(scalars["grad_norm/0.weight"][2]) and math.isnan(scalars["grad_norm/2.weight"][2])
