"""Small reference models for the bundled digits data (demo, tests and benchmarks share them)."""
from __future__ import annotations

from engine.nn.layers.activation import ReLU
from engine.nn.layers.container import Sequential
from engine.nn.layers.conv import Conv2d
from engine.nn.layers.linear import Linear
from engine.nn.layers.pooling import MaxPool2d
from engine.nn.module import Module
from engine.tensor import Tensor


class DigitsCNN(Module):
    """(n, 64) or (n, 1, 8, 8) → conv 3×3×16 → ReLU → max-pool 2 → conv 3×3×32 → ReLU → max-pool 2 → linear 10."""

    def __init__(self) -> None:
        super().__init__()
        self.features = Sequential(Conv2d(1, 16, 3, padding=1), ReLU(), MaxPool2d(2),
                                   Conv2d(16, 32, 3, padding=1), ReLU(), MaxPool2d(2))
        self.classifier = Linear(32 * 2 * 2, 10)

    def forward(self, x: Tensor) -> Tensor:
        features = self.features(x.reshape(-1, 1, 8, 8))
        return self.classifier(features.reshape(features.shape[0], -1))
