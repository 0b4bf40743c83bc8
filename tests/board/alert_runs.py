"""Runs with one planted alert each, written by the real watch() and SummaryWriter in a few hundred small steps:
loss_spike, exploding_gradient, vanishing_gradient, dead_units and nonfinite (check_numerics)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import engine
from engine import hooks, nn
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch


class _LogShift(nn.Module):
    """log(x + shift): NaN in this module once ``shift`` is made negative."""

    def __init__(self) -> None:
        super().__init__()
        self.shift = 100.0

    def forward(self, x):
        return (x + self.shift).log()


def _loop(logdir: Path, name: str, model: nn.Module, steps: int, lr: float, before_step: Any = None,
          **options: Any) -> list[Any]:
    rng = np.random.default_rng(0)
    x = engine.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    y = engine.tensor(rng.integers(0, 10, 32))
    optimizer = engine.optim.SGD(model.parameters(), lr=lr)
    hooks.reset_step(0)
    with SummaryWriter(logdir / name) as writer:
        with watch(model, writer, memory=False, capture_requests=False, **options) as handle:
            for step in range(steps):
                if before_step is not None:
                    before_step(step, model, optimizer)
                hooks.mark_step_begin()
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                value = loss.item()
                handle.log_loss(value * 50 if step == 40 else value)  # loss_spike: one planted loss at step 40
            return list(handle.alerts)


def write_alert_runs(logdir: Path) -> dict[str, tuple[str, Any]]:
    """kind -> (run, the first alert of that kind)."""
    def mlp() -> nn.Module:
        engine.manual_seed(0)
        return nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))

    def explode(step: int, model: Any, optimizer: Any) -> None:
        if step == 50:
            optimizer.param_groups[0]["lr"] = 40.0

    def poison(step: int, model: Any, optimizer: Any) -> None:
        if step == 30:
            model[0].shift = -100.0

    dead = mlp()
    with engine.no_grad():
        dead[0].bias.data[...] = -50.0
    engine.manual_seed(0)
    logged = nn.Sequential(_LogShift(), nn.Linear(64, 10))
    found: dict[str, tuple[str, Any]] = {}
    for run, alerts in (("spike_explode", _loop(logdir, "spike_explode", mlp(), 60, 0.05, explode)),
                        ("vanishing", _loop(logdir, "vanishing", mlp(), 60, 1e-9)),
                        ("dead", _loop(logdir, "dead", dead, 30, 0.05)),
                        ("nan", _loop(logdir, "nan", logged, 40, 0.05, poison, check_numerics=True,
                                      raise_on_nonfinite=False))):
        for alert in alerts:
            found.setdefault(alert.kind, (run, alert))
    return found
