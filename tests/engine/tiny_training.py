"""A few training steps of a tiny MLP (SGD, cross entropy): the op sequence tests of engine hooks compare."""
from __future__ import annotations

import numpy as np

import engine
from engine.nn import functional as F


def train_tiny(steps: int) -> None:
    engine.manual_seed(0)
    model = engine.nn.Sequential(engine.nn.Linear(4, 3), engine.nn.ReLU(), engine.nn.Linear(3, 2))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    x = engine.tensor(np.arange(20, dtype=np.float32).reshape(5, 4))
    y = engine.tensor(np.array([0, 1, 0, 1, 1]))
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
