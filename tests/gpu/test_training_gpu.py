"""Training on the GPU: the digits MLP and CNN reach 95 % with batches prefetched to the device; modules, optimizer
state and checkpoints move between devices. Skipped, saying why, where CUDA is unavailable."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nn
from engine.data import Dataset
from engine.nn import functional as F
from engine.training import evaluate, fit


@pytest.fixture(scope="module")
def digits():
    return engine.datasets.load_digits(seed=0)


def _device() -> str:
    return f"cuda:{engine.cuda.current_device()}"


def _train_on_gpu(model, digits, epochs, lr, batch_size=64):
    (x_train, y_train), (x_test, y_test) = digits
    model.to("cuda")
    train = (Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=0).batch(batch_size)
             .prefetch_to_device("cuda", 2))
    test = Dataset.from_tensor_slices((x_test, y_test)).batch(512).prefetch_to_device("cuda")
    optimizer = engine.optim.Adam(model.parameters(), lr=lr)
    history = fit(model, F.cross_entropy, optimizer, train, epochs=epochs, val_data=test, verbose=False)
    assert all(p.device == _device() for p in model.parameters())
    assert all(state["exp_avg"].device == _device() for state in optimizer.state.values())
    return history, evaluate(model, F.cross_entropy, test)


def test_mlp_reaches_95_percent_on_digits_on_gpu(digits):
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    history, result = _train_on_gpu(model, digits, epochs=10, lr=1e-2)
    assert result["accuracy"] >= 0.95, history
    assert history.loss[-1] < 0.25 * history.loss[0]


def test_cnn_reaches_95_percent_on_digits_on_gpu(digits):
    engine.manual_seed(0)
    history, result = _train_on_gpu(nn.DigitsCNN(), digits, epochs=10, lr=1e-2)
    assert result["accuracy"] >= 0.95, history


def test_gpu_training_follows_cpu_training(digits):
    """Five SGD steps of the same MLP from the same weights on both devices end at the same weights (float64)."""
    (x_train, y_train), _ = digits
    results = []
    for device in ("cpu", "cuda"):
        engine.manual_seed(3)
        model = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10)).double().to(device)
        optimizer = engine.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        for step in range(5):
            x = engine.tensor(x_train[step * 32:(step + 1) * 32].astype(np.float64), device=device)
            optimizer.zero_grad()
            F.cross_entropy(model(x), y_train[step * 32:(step + 1) * 32]).backward()
            optimizer.step()
        results.append([p.numpy() for p in model.parameters()])
    for cpu, gpu in zip(*results):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-9, atol=1e-12)


def test_fused_adam_matches_the_cpu_adam():
    """AdamW and AMSGrad through the one-launch kernel against the NumPy update, three steps."""
    rng = np.random.default_rng(0)
    shapes = [(5, 4), (4,), (3, 3, 2)]
    for options in (dict(weight_decay=0.0), dict(weight_decay=0.1, amsgrad=True)):
        for optimizer_class in (engine.optim.Adam, engine.optim.AdamW):
            values, grads = [rng.normal(size=s) for s in shapes], [[rng.normal(size=s) for s in shapes]
                                                                     for _ in range(3)]
            results = []
            for device in ("cpu", "cuda"):
                params = [nn.Parameter(engine.tensor(v, device=device)) for v in values]
                optimizer = optimizer_class(params, lr=0.01, **options)
                for step_grads in grads:
                    for p, g in zip(params, step_grads):
                        p.grad = engine.tensor(g, device=device)
                    optimizer.step()
                results.append([p.numpy() for p in params])
            for cpu, gpu in zip(*results):
                np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-13, err_msg=f"{optimizer_class} {options}")


def test_module_to_round_trip_keeps_parameters_and_moves_grads():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    params = list(model.parameters())
    before = [p.numpy().copy() for p in params]
    model(engine.tensor(np.ones((5, 3), np.float32))).sum().backward()
    grads = [p.grad.numpy().copy() for p in params]
    assert model.to("cuda") is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    assert all(p.device == _device() and p.grad.device == _device() for p in params)
    assert model[1].running_var.device == _device() and model[1].num_batches_tracked.device == _device()
    assert all(np.array_equal(g, p.grad.numpy()) for g, p in zip(grads, params))
    assert model.cpu() is model and all(p.device == "cpu" for p in params)
    assert all(np.array_equal(b, p.numpy()) for b, p in zip(before, params))


def test_optimizer_follows_a_model_moved_after_it_stepped():
    model = nn.Linear(3, 2)
    optimizer = engine.optim.Adam(model.parameters(), lr=0.1)
    for device in ("cpu", "cuda", "cpu"):
        model.to(device)
        optimizer.zero_grad()
        model(engine.tensor(np.ones((4, 3), np.float32), device=device)).sum().backward()
        optimizer.step()
        assert all(s["exp_avg"].device == model.weight.device for s in optimizer.state.values())


def test_save_on_gpu_load_anywhere(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to("cuda")
    optimizer = engine.optim.Adam(model.parameters(), lr=0.1)
    model(engine.tensor(np.ones((2, 3), np.float32), device="cuda")).sum().backward()
    optimizer.step()
    engine.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp_path / "ckpt.npz")

    same = engine.load(tmp_path / "ckpt.npz")
    assert all(t.device == _device() for t in same["model"].values())
    host = engine.load(tmp_path / "ckpt.npz", map_location="cpu")
    assert all(t.device == "cpu" for t in host["model"].values())
    mapped = engine.load(tmp_path / "ckpt.npz", map_location={_device(): "cpu"})
    assert all(t.device == "cpu" for t in mapped["model"].values())

    cpu_model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    cpu_model.load_state_dict(same["model"])  # GPU tensors into a CPU model
    for a, b in zip(cpu_model.parameters(), model.parameters()):
        assert a.device == "cpu" and np.array_equal(a.numpy(), b.numpy())
    cpu_optimizer = engine.optim.Adam(cpu_model.parameters(), lr=0.1)
    cpu_optimizer.load_state_dict(same["optimizer"])  # GPU state moves to the CPU parameters
    assert all(s["exp_avg"].device == "cpu" for s in cpu_optimizer.state.values())

    gpu_model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to("cuda")
    gpu_model.load_state_dict(host["model"])  # host tensors into a GPU model
    assert all(a.device == _device() and np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(gpu_model.parameters(), model.parameters()))


def test_prefetch_to_device_yields_device_batches(cp):
    x, y = np.arange(40, dtype=np.float32).reshape(10, 4), np.arange(10)
    base = Dataset.from_tensor_slices({"x": x, "y": y}).batch(4)
    staged = base.prefetch_to_device("cuda", buffer_size=2)
    batches = list(staged)
    assert len(batches) == 3
    for got, want in zip(batches, base, strict=True):
        assert isinstance(got["x"], cp.ndarray) and isinstance(got["y"], cp.ndarray)
        assert got["x"].device.id == engine.cuda.current_device()
        np.testing.assert_array_equal(got["x"].get(), want["x"])
        np.testing.assert_array_equal(got["y"].get(), want["y"])
