"""Torch models and a hand-written training loop for the torch watch() tests."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from instrumentation import SummaryWriter, watch
from instrumentation.format.alerts import ALERTS_RELPATH, Alert, AlertReader


class LogOf(nn.Module):
    """log(x + shift): with a negative shift, the log of negative numbers (NaN) inside this module."""

    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.shift).log()


class SqrtOfRelu(nn.Module):
    """sqrt(relu(x)): finite forward, but d sqrt/dx = 1/(2·sqrt(0)) = inf where the ReLU output is exactly 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu().sqrt()


class DigitsCNN(nn.Module):
    """engine.nn.DigitsCNN in torch, with the same module and parameter names."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.features(x.reshape(-1, 1, 8, 8))
        return self.classifier(features.reshape(features.shape[0], -1))


def mlp(hidden: int = 64) -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def batches(digits: Any, count: int, batch_size: int = 64) -> list[tuple[torch.Tensor, torch.Tensor]]:
    (x, y), _ = digits
    starts = [(i * batch_size) % (len(x) - batch_size) for i in range(count)]
    return [(x[s:s + batch_size], y[s:s + batch_size]) for s in starts]


def train(model: nn.Module, optimizer: torch.optim.Optimizer, data: list, logdir: Path, *,
          before_step: Callable[[int], None] | None = None, after_step: Callable[[int], None] | None = None,
          **options: Any) -> tuple[Any, list[Alert], BaseException | None]:
    """A hand-written loop under ``watch(model, writer, optimizer=optimizer, **options)``; returns the handle
    (closed), the alerts read back from the run's file and the error training stopped with (None)."""
    error = None
    with SummaryWriter(logdir) as writer, watch(model, writer, optimizer=optimizer, **options) as handle:
        try:
            for step, (x, y) in enumerate(data):
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                if before_step is not None:
                    before_step(step)
                optimizer.step()
                if after_step is not None:
                    after_step(step)
                handle.log_loss(loss)
        except FloatingPointError as raised:
            error = raised
    return handle, AlertReader(logdir / ALERTS_RELPATH).read(), error


def subjects(alerts: list[Alert], kind: str) -> set[str]:
    return {alert.subject for alert in alerts if alert.kind == kind}


def scalars(logdir: Path) -> dict[str, dict[int, float]]:
    """tag → {step: value} of every scalar the run's event file holds."""
    from event_helpers import read_run
    from instrumentation.format.values import ScalarValue

    found: dict[str, dict[int, float]] = {}
    for event in read_run(logdir):
        for value in event.values:
            if isinstance(value, ScalarValue):
                found.setdefault(value.tag, {})[event.step] = value.value
    return found
