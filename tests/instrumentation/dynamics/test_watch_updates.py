"""watch(): the update ratio is ‖Δw‖/‖w‖ of what the optimizer applied (hand-computed SGD momentum, torch's Adam),
gradient norms, the loss and learning rate, activation statistics, and close() detaching everything."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks, nn
from engine.nn import functional as F
from instrumentation import DynamicsThresholds, SummaryWriter, watch

from dynamics_helpers import mlp, read_scalars


@pytest.fixture(scope="module")
def batches(digits):
    (x, y), _ = digits
    return [(x[i:i + 32], y[i:i + 32]) for i in range(0, 32 * 6, 32)]


def hand_loop(model, optimizer, batches, logdir: Path, before_step=None, **options):
    """A hand-written loop (no engine.fit): hooks alone, the loss through log_loss."""
    hooks.reset_step(0)
    writer = SummaryWriter(logdir)
    handle = watch(model, writer, **options)
    try:
        for x, y in batches:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(x)), engine.tensor(y))
            loss.backward()
            if before_step is not None:
                before_step(model)
            optimizer.step()
            handle.log_loss(loss.item())
    finally:
        handle.close()
        writer.close()
    return handle, read_scalars(logdir)


def test_sgd_momentum_weight_decay_update_ratio_matches_the_hand_computed_update(batches, tmp_path):
    engine.manual_seed(0)
    model = mlp(32)
    lr, momentum, weight_decay = 0.05, 0.9, 1e-2
    optimizer = engine.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    expected: dict[str, list[float]] = {}
    grad_norms: dict[str, list[float]] = {}
    buffers: dict[str, np.ndarray] = {}

    def by_hand(model):  # torch's SGD rule written out: g' = g + wd·w; b = μ·b + g' (b = g' first); Δw = -lr·b
        for name, p in model.named_parameters():
            w, g = p.numpy().astype(np.float64), p.grad.numpy().astype(np.float64)
            g = g + weight_decay * w
            buffers[name] = g if name not in buffers else momentum * buffers[name] + g
            expected.setdefault(name, []).append(np.linalg.norm(lr * buffers[name]) / np.linalg.norm(w))
            grad_norms.setdefault(name, []).append(np.linalg.norm(p.grad.numpy().astype(np.float64)))

    _, scalars = hand_loop(model, optimizer, batches, tmp_path / "run", before_step=by_hand)
    for name in expected:
        logged = [scalars[f"update_ratio/{name}"][step] for step in range(len(batches))]
        np.testing.assert_allclose(logged, expected[name], rtol=2e-4, err_msg=name)  # float32 weights
        np.testing.assert_allclose([scalars[f"grad_norm/{name}"][s] for s in range(len(batches))], grad_norms[name],
                                   rtol=1e-6)
    # float32 on disk
    assert scalars["train/learning_rate"] == pytest.approx({step: lr for step in range(len(batches))})
    assert sorted(scalars["train/loss"]) == list(range(len(batches)))


def test_adam_update_ratio_matches_torch_adam_on_the_same_gradients(batches, tmp_path):
    torch = pytest.importorskip("torch")
    engine.manual_seed(1)
    model = mlp(32)
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-3)
    names = [name for name, _ in model.named_parameters()]
    peers = [torch.nn.Parameter(torch.tensor(p.numpy(), dtype=torch.float64)) for p in model.parameters()]
    peer_optimizer = torch.optim.Adam(peers, lr=3e-3, weight_decay=1e-3)
    expected: dict[str, list[float]] = {name: [] for name in names}

    def torch_step(model):
        for peer, p in zip(peers, model.parameters()):
            with torch.no_grad():
                peer.copy_(torch.tensor(p.numpy(), dtype=torch.float64))
            peer.grad = torch.tensor(p.grad.numpy(), dtype=torch.float64)
        before = [peer.detach().clone() for peer in peers]
        peer_optimizer.step()
        for name, peer, old in zip(names, peers, before):
            expected[name].append(float((peer.detach() - old).norm() / old.norm()))

    _, scalars = hand_loop(model, optimizer, batches, tmp_path / "run", before_step=torch_step)
    for name in names:
        logged = [scalars[f"update_ratio/{name}"][step] for step in range(len(batches))]
        np.testing.assert_allclose(logged, expected[name], rtol=5e-4, err_msg=name)


def test_activation_statistics_match_numpy_on_the_layer_output(batches, tmp_path):
    engine.manual_seed(2)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 8), nn.Sigmoid(), nn.Linear(8, 10))
    outputs: dict[str, np.ndarray] = {}
    model[1].register_forward_hook(lambda m, i, o: outputs.__setitem__("relu", o.numpy().copy()))
    model[3].register_forward_hook(lambda m, i, o: outputs.__setitem__("sigmoid", o.numpy().copy()))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    _, scalars = hand_loop(model, optimizer, batches[:1], tmp_path / "run", every=1)
    relu, sigmoid = outputs["relu"], outputs["sigmoid"]
    assert scalars["act/1/mean_abs"][0] == pytest.approx(np.abs(relu).mean(), rel=1e-6)
    assert scalars["act/1/dead_fraction"][0] == pytest.approx(np.mean([not (relu[:, j] > 0).any() for j in range(16)]))
    saturated = np.mean((sigmoid <= 0.01) | (sigmoid >= 0.99))
    assert scalars["act/3/saturated_fraction"][0] == pytest.approx(saturated)
    assert "act/3/dead_fraction" not in scalars and "act/1/saturated_fraction" not in scalars
    assert scalars["act/0/mean_abs"][0] > 0 and "act/0/dead_fraction" not in scalars


def test_every_and_histograms_every_choose_the_steps(batches, tmp_path):
    engine.manual_seed(0)
    model = mlp(16)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    _, scalars = hand_loop(model, optimizer, batches, tmp_path / "run", every=2, histograms_every=3)
    assert sorted(scalars["update_ratio/0.weight"]) == [0, 2, 4]
    assert sorted(scalars["act/1/dead_fraction"]) == [0, 2, 4]
    assert sorted(scalars["perf/step_time_ms"]) == [0, 2, 4]
    from instrumentation.format.reader import EventFileReader
    from instrumentation.format.values import HistogramValue
    histogram_steps = {(value.tag, value.step) for path in (tmp_path / "run").glob("events.out.tfevents.*")
                       for event in EventFileReader(path).read() for value in event.values
                       if isinstance(value, HistogramValue)}
    assert {step for tag, step in histogram_steps if tag == "grad/0.weight"} == {0, 3, 5}  # 5: the last, at close()
    assert {tag for tag, _ in histogram_steps} == {f"{kind}/{name}" for kind in ("grad", "weight")
                                                   for name, _ in model.named_parameters()}


def test_fit_callback_logs_the_loss_of_each_step_and_perf(digits, tmp_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = mlp(16)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    hooks.reset_step(0)
    data = engine.data.Dataset.from_tensor_slices((x[:256], y[:256])).batch(64)
    with SummaryWriter(tmp_path / "run") as writer, watch(model, writer) as handle:
        history = engine.fit(model, F.cross_entropy, optimizer, data, epochs=2, val_data=data, callbacks=[handle],
                             verbose=False)
    scalars = read_scalars(tmp_path / "run")
    assert [scalars["train/loss"][step] for step in range(8)] == pytest.approx(history.step_losses)
    assert sorted(scalars["perf/samples_per_sec"]) == list(range(8))
    assert all(value > 0 for value in scalars["perf/step_time_ms"].values())
    assert sorted(scalars["act/1/dead_fraction"]) == list(range(8))  # validation passes (eval mode) are not counted


def test_close_detaches_every_hook_and_forward_hook(tmp_path):
    engine.manual_seed(0)
    model = mlp(16)
    observers_before = hooks.observers()
    forward_hooks_before = {path: dict(m._forward_hooks) for path, m in model.named_modules()}
    with SummaryWriter(tmp_path / "run") as writer:
        handle = watch(model, writer, check_numerics=True)
        # watch, its sampler (kept at every step for the numerics check), its numerics check, the memory tracker,
        # its step log and peak capture (the capture requests are checked by the watch: no recorder while idle)
        assert len(hooks.observers()) == len(observers_before) + 6
        assert handle.numerics.op in hooks.op  # the numerics check: an op recorder
        second = watch(mlp(4), writer, check_numerics=True, memory=False, capture_requests=False)
        assert handle.numerics.op in hooks.op and second.numerics.op in hooks.op  # both check every op
        second.close()
        closed = []
        handle.attach(type("Component", (), {"close": lambda self: closed.append(True)})())
        handle.close()
        handle.close()  # idempotent
    assert hooks.observers() == observers_before
    assert {path: dict(m._forward_hooks) for path, m in model.named_modules()} == forward_hooks_before
    assert closed == [True]
    assert not hooks.op and not hooks.optimizer_step_begin


def test_bad_arguments_are_named(tmp_path):
    model = mlp(8)
    with SummaryWriter(tmp_path / "run") as writer:
        with pytest.raises(ValueError, match="every"):
            watch(model, writer, every=0)
        with pytest.raises(TypeError, match="engine.nn.Module"):
            watch(object(), writer)
        with pytest.raises(TypeError, match="thresholds"):
            watch(model, writer, thresholds={"dead_fraction": 0.5})
    with pytest.raises(TypeError, match="SummaryWriter"):
        watch(model, object())
    with pytest.raises(ValueError, match="dead_patience"):
        DynamicsThresholds(dead_patience=0)
    with pytest.raises(ValueError, match="vanishing_update_ratio"):
        DynamicsThresholds(vanishing_update_ratio=float("nan"))
