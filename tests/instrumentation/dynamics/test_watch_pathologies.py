"""Planted pathologies on the digits data, each found with the right kind, layer and steps; healthy runs raise none.

Each run is one to ten short epochs of 23 steps (well under a second on one core, from the engine's own speed)."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader

from dynamics_helpers import DigitsCNN, deep_sigmoid, first_step, kinds, mlp, subjects, train_watched


@pytest.mark.parametrize("name, build, optimizer, epochs", [
    ("mlp-adam", mlp, lambda p: engine.optim.Adam(p, lr=1e-2), 10),
    ("mlp-sgd-momentum", mlp, lambda p: engine.optim.SGD(p, lr=0.1, momentum=0.9), 10),
    ("cnn-adam", DigitsCNN, lambda p: engine.optim.Adam(p, lr=1e-2), 3),
])
def test_healthy_runs_raise_no_alert(digits, tmp_path, name, build, optimizer, epochs):
    engine.manual_seed(0)
    model = build()
    handle, alerts = train_watched(model, optimizer(model.parameters()), digits, tmp_path / name, epochs=epochs,
                                   check_numerics=True)
    assert alerts == [] and handle.alerts == []
    accuracy = engine.training.evaluate(model, F.cross_entropy, [digits[1]])["accuracy"]
    assert accuracy > 0.9  # healthy indeed: it learned


def test_a_learning_rate_far_too_high_is_an_exploding_update_in_the_first_steps(digits, tmp_path):
    engine.manual_seed(0)
    model = mlp()
    _, alerts = train_watched(model, engine.optim.SGD(model.parameters(), lr=20.0), digits, tmp_path / "run")
    exploding = [a for a in alerts if a.kind == "exploding_gradient"]
    assert {a.subject for a in exploding} == {"0.weight", "2.weight"}  # weights only, both layers
    assert all(a.step <= 2 and a.severity == "error" for a in exploding)
    assert all(max(a.evidence["update_ratios"]) > 1.0 for a in exploding)


def test_adam_with_a_learning_rate_far_too_high_is_caught_at_step_0(digits, tmp_path):
    engine.manual_seed(0)
    model = mlp()
    _, alerts = train_watched(model, engine.optim.Adam(model.parameters(), lr=1.0), digits, tmp_path / "run")
    assert first_step(alerts, "exploding_gradient") == 0
    assert subjects(alerts, "exploding_gradient") == {"0.weight", "2.weight"}


def test_relus_that_never_fire_are_dead_units_of_that_layer(digits, tmp_path):
    engine.manual_seed(0)
    model = mlp()
    with engine.no_grad():
        model[0].bias.data[...] = -50.0  # every pre-activation of layer 0 is negative: ReLU "1" never fires
    _, alerts = train_watched(model, engine.optim.Adam(model.parameters(), lr=1e-3), digits, tmp_path / "run")
    dead = [a for a in alerts if a.kind == "dead_units"]
    assert [a.subject for a in dead] == ["1"]
    assert dead[0].evidence["first_step"] == 0 and dead[0].step == 9  # dead_patience = 10 checks
    assert dead[0].evidence["dead_fractions"] == [1.0] * 10
    assert "exploding_gradient" not in kinds(alerts)


def test_a_tiny_learning_rate_on_a_deep_sigmoid_net_vanishes_in_the_early_layers(digits, tmp_path):
    engine.manual_seed(0)
    model = deep_sigmoid(depth=8)
    _, alerts = train_watched(model, engine.optim.SGD(model.parameters(), lr=1e-3), digits, tmp_path / "run",
                              epochs=2)
    vanishing = subjects(alerts, "vanishing_gradient")
    assert {"0.weight", "2.weight", "4.weight"} <= vanishing  # the layers furthest from the loss …
    assert "16.weight" not in vanishing  # … and not the output layer, whose gradient is not attenuated
    assert first_step(alerts, "vanishing_gradient") == 29  # judged from step 20, for 10 checks
    assert kinds(alerts) == {"vanishing_gradient"}


def test_a_bad_batch_is_a_loss_spike_at_its_step_in_a_hand_written_loop(digits, tmp_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = mlp()
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-2)
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer, watch(model, writer) as handle:
        for step in range(70):
            xb, yb = x[step * 20:(step + 1) * 20], y[step * 20:(step + 1) * 20]
            if step == 60:
                yb = (yb + 1) % 10  # a batch with wrong labels
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(xb)), engine.tensor(yb))
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())
    spikes = [a for a in AlertReader(tmp_path / "run" / ALERTS_RELPATH).read() if a.kind == "loss_spike"]
    assert [a.step for a in spikes] == [60]
    assert spikes[0].evidence["loss"] > spikes[0].evidence["limit"] > spikes[0].evidence["median"]
    assert np.isfinite(spikes[0].evidence["loss"])


def test_an_annealed_learning_rate_is_not_a_vanishing_gradient():
    from instrumentation.dynamics.detectors import DynamicsRules
    from instrumentation.dynamics.thresholds import DynamicsThresholds

    rules = DynamicsRules(DynamicsThresholds())
    names, ndims = ("w",), {"w": 2}
    tiny = np.array([1e-6]), np.array([0.5])
    alerts = []
    for step in range(60):  # lr decays from 1e-2 to ~0: updates shrink because of the schedule
        rules.observe_learning_rate(1e-2 * (1 - step / 60) ** 3)
        alerts += rules.updates(step, names, *tiny, ndims) if step > 30 else []
    assert alerts == []
    constant = DynamicsRules(DynamicsThresholds())
    found = []
    for step in range(60):  # a constant tiny lr (the planted vanishing setup) is still reported
        constant.observe_learning_rate(1e-6)
        found += constant.updates(step, names, *tiny, ndims)
    assert [a.kind for a in found] == ["vanishing_gradient"]
