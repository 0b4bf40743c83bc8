"""watch() samples the end of a run and the step after an alert, so the charts reach the run's last step and show
what followed an alert, whatever the interval."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks
from engine.data import Dataset
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.reader import EventFileReader
from instrumentation.format.values import HistogramValue

from dynamics_helpers import mlp, read_scalars


def _data(batches: int) -> Dataset:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32 * batches, 64)).astype(np.float32), rng.integers(0, 10, 32 * batches)
    return Dataset.from_tensor_slices((x, y)).batch(32)


def _hand_loop(tmp_path, steps: int, lr_at: dict[int, float] | None = None, **options):
    """A hand-written loop of ``steps`` steps under watch(); ``lr_at``: step -> learning rate set before it. Returns
    the first layer's last gradient (float64), read before the handle closes."""
    engine.manual_seed(0)
    model = mlp(16)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05)
    x = engine.tensor(np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32))
    y = engine.tensor(np.arange(32) % 10)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path) as writer:
        with watch(model, writer, memory=False, capture_requests=False, **options) as handle:
            for step in range(steps):
                if step in (lr_at or {}):
                    optimizer.param_groups[0]["lr"] = lr_at[step]
                hooks.mark_step_begin()
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                handle.log_loss(loss.item())
            return model[0].weight.grad.numpy().astype(np.float64)


def test_close_writes_the_last_steps_gradient_norms_and_histograms(tmp_path):
    grad = _hand_loop(tmp_path, 25, every=10, histograms_every=10)
    scalars = read_scalars(tmp_path)
    assert sorted(scalars["grad_norm/0.weight"]) == [0, 10, 20, 24]
    assert scalars["grad_norm/0.weight"][24] == np.float32(np.sqrt((grad ** 2).sum()))  # an independent norm
    assert sorted(scalars["update_ratio/0.weight"]) == [0, 10, 20]  # Δw needs a step in progress: not at close
    assert scalars["train/learning_rate"][24] == np.float32(0.05)
    histograms = {(value.tag, value.step) for path in tmp_path.glob("events.out.tfevents.*")
                  for event in EventFileReader(path).read() for value in event.values
                  if isinstance(value, HistogramValue)}
    assert {step for tag, step in histograms if tag == "grad/0.weight"} == {0, 10, 20, 24}


def test_engine_fit_samples_its_last_step_whatever_the_interval(tmp_path):
    engine.manual_seed(0)
    model = mlp(16)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path) as writer:
        with watch(model, writer, every=1000, memory=False, capture_requests=False) as handle:
            engine.fit(model, F.cross_entropy, engine.optim.SGD(model.parameters(), lr=0.05), _data(12), epochs=3,
                       callbacks=[handle], verbose=False)
    scalars = read_scalars(tmp_path)
    assert sorted(scalars["update_ratio/0.weight"]) == [0, 35]  # step 0 and the last of 3 × 12 steps
    assert sorted(scalars["act/1/dead_fraction"]) == [0, 35]


def test_the_step_after_an_alert_is_sampled(tmp_path):
    """An exploding update (patience 1: confirmed at once, so no streak keeps every step observed) at a sampled step:
    the step after it is sampled too."""
    _hand_loop(tmp_path, 400, {200: 50.0}, budget=0.001, histograms_every=0)
    exploding = [a for a in AlertReader(tmp_path / ALERTS_RELPATH).read() if a.kind == "exploding_gradient"]
    assert exploding, "the planted explosion was not reported"
    measured = sorted(read_scalars(tmp_path)["update_ratio/0.weight"])
    first = exploding[0].step
    assert first in measured and first + 1 in measured
    assert first - 1 not in measured or first < 32 + 32  # not sampled at every step anyway (the interval grew)


def test_after_fits_sampled_last_step_close_still_writes_the_last_histograms(tmp_path):
    engine.manual_seed(0)
    model = mlp(16)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path) as writer:
        with watch(model, writer, every=1000, histograms_every=1000, memory=False, capture_requests=False) as handle:
            engine.fit(model, F.cross_entropy, engine.optim.SGD(model.parameters(), lr=0.05), _data(5), epochs=2,
                       callbacks=[handle], verbose=False)
    histograms = {(value.tag, value.step) for path in tmp_path.glob("events.out.tfevents.*")
                  for event in EventFileReader(path).read() for value in event.values
                  if isinstance(value, HistogramValue)}
    assert {step for tag, step in histograms if tag == "weight/0.weight"} == {0, 9}
    assert sorted(read_scalars(tmp_path)["update_ratio/0.weight"]) == [0, 9]


def test_a_second_fit_with_the_same_handle_samples_its_own_last_step(tmp_path):
    engine.manual_seed(0)
    model = mlp(16)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path) as writer:
        with watch(model, writer, every=1000, memory=False, capture_requests=False) as handle:
            engine.fit(model, F.cross_entropy, optimizer, _data(7), epochs=2, callbacks=[handle], verbose=False)
            engine.fit(model, F.cross_entropy, optimizer, _data(4), epochs=3, callbacks=[handle], verbose=False)
    assert sorted(read_scalars(tmp_path)["update_ratio/0.weight"]) == [0, 13, 13 + 12]  # 14 steps, then 3 × 4
