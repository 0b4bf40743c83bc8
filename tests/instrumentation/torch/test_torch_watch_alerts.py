"""watch() of a torch model raises the engine's alerts on planted pathologies, and none on a healthy run."""
from __future__ import annotations

import math

import torch
from torch import nn

from torch_helpers import batches, mlp, scalars, subjects, train


def test_a_healthy_run_raises_nothing_and_logs_every_step(digits, tmp_path):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    handle, alerts, error = train(model, optimizer, batches(digits, 80), tmp_path / "run", check_numerics=True)
    assert error is None and alerts == [] and handle.alerts == []
    logged = scalars(tmp_path / "run")
    assert sorted(logged["train/loss"]) == list(range(80))
    assert logged["train/loss"][79] < 0.5 * logged["train/loss"][0]  # it did train
    assert set(range(32)) <= set(logged["update_ratio/2.weight"])  # the pacer's warm-up observes every step
    assert all(1e-5 < ratio < 1 for ratio in logged["update_ratio/2.weight"].values())


def test_a_learning_rate_too_high_on_one_layer_is_an_exploding_gradient_there_only(digits, tmp_path):
    model = mlp()
    too_high = [model[2].weight, model[2].bias]
    rest = [p for p in model.parameters() if all(p is not q for q in too_high)]
    optimizer = torch.optim.SGD([{"params": rest, "lr": 0.05}, {"params": too_high, "lr": 200.0}])
    _, alerts, _ = train(model, optimizer, batches(digits, 12), tmp_path / "run")
    assert subjects(alerts, "exploding_gradient") == {"2.weight"}
    [alert] = [a for a in alerts if a.kind == "exploding_gradient"]
    assert alert.severity == "error" and alert.step == 0
    assert alert.evidence["update_ratios"][-1] > 1 or not math.isfinite(alert.evidence["update_ratios"][-1])


def test_a_layer_with_a_very_negative_bias_is_dead_units_naming_its_activation(digits, tmp_path):
    model = mlp()
    with torch.no_grad():
        model[2].bias.fill_(-100.0)  # the ReLU after it ("3") never fires
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    _, alerts, _ = train(model, optimizer, batches(digits, 40), tmp_path / "run")
    assert subjects(alerts, "dead_units") == {"3"}
    [alert] = [a for a in alerts if a.kind == "dead_units"]
    assert alert.evidence["dead_fractions"][-1] == 1.0 and alert.step == 9  # patience 10, from step 0
    logged = scalars(tmp_path / "run")
    assert set(logged["act/3/dead_fraction"].values()) == {1.0}
    assert max(logged["act/1/dead_fraction"].values()) < 0.9


def test_a_loss_spike_is_reported_at_its_step(digits, tmp_path):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = batches(digits, 40)
    x, y = data[30]
    data[30] = (x * 40.0, (y + 5) % 10)  # one corrupted batch (inputs scaled, labels wrong): its loss jumps ~9x
    _, alerts, _ = train(model, optimizer, data, tmp_path / "run")
    assert [(a.kind, a.step) for a in alerts if a.kind == "loss_spike"] == [("loss_spike", 30)]


def test_pause_stops_observing_and_resume_starts_again(digits, tmp_path):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    from instrumentation import SummaryWriter, watch

    with SummaryWriter(tmp_path / "run") as writer, watch(model, writer, optimizer=optimizer, every=1) as handle:
        for step, (x, y) in enumerate(batches(digits, 12)):
            if step == 4:
                handle.pause()
            if step == 8:
                handle.resume()
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            handle.log_loss(loss)
    logged = scalars(tmp_path / "run")
    assert sorted(logged["act/1/mean_abs"]) == [0, 1, 2, 3, 8, 9, 10, 11]
    assert sorted(logged["grad_norm/0.weight"]) == [0, 1, 2, 3, 8, 9, 10, 11]
    assert sorted(logged["train/loss"]) == list(range(12))  # the loss is logged while paused


def test_without_an_optimizer_argument_any_optimizer_step_ends_a_step_and_evaluation_opens_none(digits, tmp_path):
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    from instrumentation import SummaryWriter, watch

    data = batches(digits, 6)
    with SummaryWriter(tmp_path / "run") as writer, watch(model, writer, every=1) as handle:
        for x, y in data:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()  # torch's global step hooks: no optimizer was given
            handle.log_loss(loss)
            model.eval()
            with torch.no_grad():
                model(x)  # an evaluation forward between steps: no step of its own, no activation statistics
            model.train()
    logged = scalars(tmp_path / "run")
    assert sorted(logged["update_ratio/0.weight"]) == sorted(logged["train/loss"]) == list(range(6))
    assert sorted(logged["act/1/mean_abs"]) == list(range(6))
    assert sorted(logged["perf/data_time_ms"]) == list(range(6))
    assert all(value > 0 for step, value in logged["perf/data_time_ms"].items() if step > 0)
