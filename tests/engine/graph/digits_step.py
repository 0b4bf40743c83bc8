"""The digits MLP and CNN training steps, eager and traced, from one seed (shared by the traced-mode tests)."""
from __future__ import annotations

import numpy as np

import engine
from engine import nn


def make(model_kind: str, optimizer: str = "sgd", seed: int = 0):
    engine.manual_seed(seed)
    if model_kind == "mlp":
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.models.DigitsCNN()
    if optimizer == "sgd":
        opt = engine.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = engine.optim.Adam(model.parameters(), lr=1e-3)

    return model, opt, training_step(model, opt)


def training_step(model, opt):
    """One training step of ``model`` on a batch (cross-entropy), returning the loss: what the traced-mode tests
    run eagerly or hand to ``engine.function``."""
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def batches(n_steps: int, batch: int = 32, seed: int = 0):
    (x, y), _ = engine.datasets.load_digits(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(n_steps):
        idx = rng.integers(0, len(x), batch)
        yield engine.tensor(x[idx]), engine.tensor(y[idx])
