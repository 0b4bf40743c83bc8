"""``python -m instrumentation.demo``: train an MLP and a CNN on the bundled digits and log everything the board shows."""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Any, Sequence


import engine
from engine import nn
from engine.nn import functional as F
from instrumentation.monitor import watch
from instrumentation.profiler import profile, schedule
from instrumentation.summary import SummaryWriter
from instrumentation.system import SystemSampler


class ValidationLogger:
    """An ``engine.fit`` callback writing the epoch's validation loss and accuracy (``watch`` logs training)."""

    def __init__(self, writer: SummaryWriter) -> None:
        self.writer = writer

    def on_epoch_end(self, state: Any) -> None:
        for key in ("val_loss", "val_accuracy"):
            if key in state.logs:
                self.writer.add_scalar(f"val/{key[4:]}", state.logs[key], state.global_step)


class EpochSchedule:
    """Steps an LR scheduler at each epoch end."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def on_epoch_end(self, state: Any) -> None:
        self.scheduler.step()


def build_model(kind: str) -> nn.Module:
    if kind == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    if kind == "cnn":
        return nn.DigitsCNN()
    raise ValueError(f"unknown demo model {kind!r}; choose 'mlp' or 'cnn'")


def train_one(kind: str, logdir: str, epochs: int, seed: int, verbose: bool) -> float:
    """Train one demo model into ``logdir/<timestamp>-digits-<kind>``; returns its test accuracy."""
    # NOTE: the previous run's model and gradients live in reference cycles: free them before the steps restart,
    # else this run's snapshots list them as live blocks stamped with the previous run's step numbers
    gc.collect()
    engine.manual_seed(seed)
    engine.hooks.reset_step()  # each demo run counts its steps from 0
    (x_train, y_train), (x_test, y_test) = engine.datasets.load_digits(seed=seed)
    if kind == "cnn":
        x_train, x_test = x_train.reshape(-1, 1, 8, 8), x_test.reshape(-1, 1, 8, 8)
    train = engine.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=seed).batch(32)
    test = engine.data.Dataset.from_tensor_slices((x_test, y_test)).batch(256)
    model = build_model(kind)
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = engine.optim.CosineAnnealingLR(optimizer, T_max=epochs)
    run_dir = os.path.join(logdir, f"{time.strftime('%Y%m%d-%H%M%S')}-digits-{kind}")
    with SummaryWriter(run_dir) as writer:
        writer.add_text("model", f"```\n{model.summary(input_shape=(1,) + x_train.shape[1:])}\n```", 0)
        handle = watch(model, writer, histograms_every=20)  # dynamics, memory tracker, capture requests
        handle.attach(SystemSampler(writer, interval=0.5))
        # One profiled capture early in training, for the Profile page.
        with profile(run_dir, schedule=schedule(wait=5, warmup=2, active=5)):
            history = engine.fit(model, F.cross_entropy, optimizer, train, epochs, val_data=test,
                                 callbacks=(handle, ValidationLogger(writer), EpochSchedule(scheduler)),
                                 verbose=verbose)
        handle.close()
        accuracy = history.val_accuracy[-1]
        writer.add_hparams({"model": kind, "lr": 3e-3, "epochs": epochs, "seed": seed},
                           {"hparam/test_accuracy": accuracy})
    print(f"demo: {kind} reached test accuracy {accuracy:.3f}; logs in {run_dir}")
    return accuracy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instrumentation.demo", description=__doc__)
    parser.add_argument("--logdir", default="logs", help="log directory to write runs into (default: logs)")
    parser.add_argument("--epochs", type=int, default=15, help="training epochs per model (default: 15)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn (default: both)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    os.makedirs(args.logdir, exist_ok=True)
    for kind in [k.strip() for k in args.models.split(",") if k.strip()]:
        train_one(kind, args.logdir, args.epochs, args.seed, verbose=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
