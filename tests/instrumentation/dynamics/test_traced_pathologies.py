"""The planted pathologies of the watch() and numerics tests, found the same way when the training step is an
``engine.function`` (traced once, replayed after): replay emits the op, step, optimizer and module records and
calls the modules' forward hooks, so watch() works unchanged."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks, nn
from instrumentation import SummaryWriter, watch
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from tests.engine.graph.digits_step import training_step

from dynamics_helpers import mlp
from test_watch_numerics import SqrtOfRelu, batches_with_negative_inputs_at, log_model


def hand_loop(mode, model, optimizer, batches, logdir, **options):
    """(error or None, alerts, losses) of a hand-written loop, the step eager or traced."""
    step = training_step(model, optimizer)
    run = engine.function(step) if mode == "traced" else step
    hooks.reset_step(0)
    losses, error = [], None
    with SummaryWriter(logdir) as writer, watch(model, writer, **options) as handle:
        try:
            for x, y in batches:
                loss = run(engine.tensor(x), engine.tensor(y))
                losses.append(loss.item())
                handle.log_loss(losses[-1])
        except engine.NonFiniteError as raised:
            error = raised
    if mode == "traced" and error is None:
        assert run.trace_count == 1
    return error, AlertReader(logdir / ALERTS_RELPATH).read(), losses


def digest(alerts):
    return sorted((a.kind, a.subject, a.step) for a in alerts)


def both(build, make_optimizer, batches, tmp_path, **options):
    results = {}
    for mode in ("eager", "traced"):
        model = build()
        results[mode] = hand_loop(mode, model, make_optimizer(model.parameters()), batches, tmp_path / mode, **options)
    return results["eager"], results["traced"]


def batches_of(digits, count, size=64):
    (x, y), _ = digits
    return [(x[i * size:(i + 1) * size], y[i * size:(i + 1) * size]) for i in range(count)]


def seeded(build):
    def make():
        engine.manual_seed(0)
        return build()
    return make


def test_exploding_updates_from_a_learning_rate_far_too_high(digits, tmp_path):
    eager, traced = both(seeded(mlp), lambda p: engine.optim.SGD(p, lr=20.0), batches_of(digits, 20), tmp_path)
    exploding = [a for a in traced[1] if a.kind == "exploding_gradient"]
    assert {a.subject for a in exploding} == {"0.weight", "2.weight"} and min(a.step for a in exploding) <= 2
    assert digest(traced[1]) == digest(eager[1]) and traced[2] == eager[2]


def test_dead_relus_are_found_through_the_replayed_forward_hooks(digits, tmp_path):
    def build():
        engine.manual_seed(0)
        model = mlp()
        with engine.no_grad():
            model[0].bias.data[...] = -50.0
        return model

    eager, traced = both(build, lambda p: engine.optim.Adam(p, lr=1e-3), batches_of(digits, 20), tmp_path)
    dead = [a for a in traced[1] if a.kind == "dead_units"]
    assert [a.subject for a in dead] == ["1"] and dead[0].step == 9
    assert digest(traced[1]) == digest(eager[1])


def test_log_of_a_negative_number_is_named_in_a_replayed_step(digits, tmp_path):
    batches = batches_with_negative_inputs_at(digits, step=3)
    model = log_model()
    error, alerts, losses = hand_loop("traced", model, engine.optim.SGD(model.parameters(), lr=0.1), batches,
                                      tmp_path / "run", check_numerics=True)
    assert isinstance(error, engine.NonFiniteError)
    assert (error.op, error.module, error.phase, error.step) == ("Log", "0", "forward", 3)
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert [(a.kind, a.subject, a.step) for a in alerts if a.kind == "nonfinite"] == [("nonfinite", "0", 3)]


def test_an_infinite_gradient_is_found_in_the_traced_backward(digits, tmp_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), SqrtOfRelu(), nn.Linear(32, 10))
    error, alerts, _ = hand_loop("traced", model, engine.optim.SGD(model.parameters(), lr=0.1), [(x[:32], y[:32])],
                                 tmp_path / "run", check_numerics=True)
    assert (error.op, error.module, error.phase, error.step) == ("SqrtBackward", "1", "backward", 0)
    assert alerts[0].evidence["outputs"][0]["posinf_count"] > 0


def test_an_infinite_update_is_found_in_a_replayed_optimizer_phase(digits, tmp_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)

    class InfiniteFromStep1:  # the learning rate is read by the replayed optimizer node: set it after the trace
        def __iter__(self):
            yield x[:32], y[:32]
            optimizer.param_groups[0]["lr"] = float("inf")
            yield x[:32], y[:32]

    error, _, losses = hand_loop("traced", model, optimizer, InfiniteFromStep1(), tmp_path / "run",
                                 check_numerics=True)
    assert len(losses) == 1
    assert (error.op, error.module, error.phase, error.step) == ("SGD.step", "0.weight", "optimizer", 1)
