"""Digits models and a training helper for the watch() tests: healthy runs and planted pathologies."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import engine
from engine import nn
from engine.data import Dataset
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.format.alerts import ALERTS_RELPATH, Alert, AlertReader


DigitsCNN = nn.DigitsCNN


class LogOf(nn.Module):
    """log(x + shift): with a negative shift, the log of negative numbers (NaN) inside this module."""

    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x):
        return (x + self.shift).log()


def mlp(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def deep_sigmoid(depth: int = 8, width: int = 32) -> nn.Module:
    layers: list[Any] = [nn.Linear(64, width), nn.Sigmoid()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def train_watched(model: nn.Module, optimizer: Any, digits: Any, logdir: Path, *, epochs: int = 1,
                  batch_size: int = 64, **watch_options: Any) -> tuple[Any, list[Alert]]:
    """Train with engine.fit and watch(); returns the handle (closed) and the alerts read back from the file."""
    (x_train, y_train), _ = digits
    train = Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=0).batch(batch_size)
    engine.hooks.reset_step(0)
    writer = SummaryWriter(logdir)
    handle = watch(model, writer, **watch_options)
    try:
        engine.fit(model, F.cross_entropy, optimizer, train, epochs=epochs, callbacks=[handle], verbose=False)
    finally:
        handle.close()
        writer.close()
    return handle, AlertReader(logdir / ALERTS_RELPATH).read()


def first_step(alerts: list[Alert], kind: str) -> int:
    steps = [alert.step for alert in alerts if alert.kind == kind]
    return min(steps) if steps else -1


def kinds(alerts: list[Alert]) -> set[str]:
    return {alert.kind for alert in alerts}


def subjects(alerts: list[Alert], kind: str) -> set[str]:
    return {alert.subject for alert in alerts if alert.kind == kind}


def read_scalars(logdir: Path) -> dict[str, dict[int, float]]:
    """tag → {step: value} of every scalar in the run's event files."""
    from instrumentation.format.reader import EventFileReader
    from instrumentation.format.values import ScalarValue

    scalars: dict[str, dict[int, float]] = {}
    for path in sorted(Path(logdir).glob("events.out.tfevents.*")):
        for event in EventFileReader(path).read():
            for value in event.values:
                if isinstance(value, ScalarValue):
                    scalars.setdefault(value.tag, {})[value.step] = value.value
    return scalars
