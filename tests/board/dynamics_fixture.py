"""A log directory with planted training pathologies, written by really training digits models under watch()."""
from __future__ import annotations

from pathlib import Path

import engine
from engine import nn
from engine.data import Dataset
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch


def _train(logdir: Path, name: str, model: nn.Module, optimizer, epochs: int) -> None:
    (x, y), _ = engine.datasets.load_digits(seed=0)
    train = Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).batch(64)
    engine.hooks.reset_step(0)
    with SummaryWriter(logdir / name) as writer, watch(model, writer) as handle:
        engine.fit(model, F.cross_entropy, optimizer, train, epochs=epochs, callbacks=[handle], verbose=False)


def write_dynamics_logdir(logdir: Path) -> Path:
    """Run "dead_relu": layer 0's ReLUs never fire (dead_units on layer "1" at step 9). Run "lr_too_high": SGD with
    lr 20 (exploding_gradient at steps 0-1, then dead units, a loss spike and vanishing updates)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        engine.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        with engine.no_grad():
            model[0].bias.data[...] = -50.0
        _train(logdir, "dead_relu", model, engine.optim.Adam(model.parameters(), lr=1e-3), epochs=1)
        engine.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        _train(logdir, "lr_too_high", model, engine.optim.SGD(model.parameters(), lr=20.0), epochs=2)
    return logdir
