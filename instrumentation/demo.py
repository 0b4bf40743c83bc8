"""``python -m instrumentation.demo``: train an MLP and a CNN on the bundled digits and log both for the board."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence


import engine
from engine import nn
from engine.nn import functional as F
from instrumentation.summary import SummaryWriter


class SummaryCallback:
    """An ``engine.fit`` callback that logs loss, accuracy, learning rate, step time and weight histograms."""

    def __init__(self, writer: SummaryWriter, histograms_every_epochs: int = 1) -> None:
        self.writer = writer
        self.histograms_every_epochs = histograms_every_epochs
        self._step_start_ns = 0

    def on_step_begin(self, state: Any) -> None:
        self._step_start_ns = time.perf_counter_ns()

    def on_step_end(self, state: Any) -> None:
        step = state.global_step
        self.writer.add_scalar("train/loss", state.loss, step)
        if "accuracy" in state.logs:
            self.writer.add_scalar("train/accuracy", state.logs["accuracy"], step)
        self.writer.add_scalar("train/learning_rate", state.optimizer.param_groups[0]["lr"], step)
        step_time_ms = (time.perf_counter_ns() - self._step_start_ns) / 1e6
        self.writer.add_scalar("perf/step_time_ms", step_time_ms, step)
        if state.batch_size:
            self.writer.add_scalar("perf/samples_per_sec", state.batch_size / max(step_time_ms, 1e-6) * 1e3, step)

    def on_epoch_end(self, state: Any) -> None:
        step = state.global_step
        for key in ("val_loss", "val_accuracy"):
            if key in state.logs:
                self.writer.add_scalar(f"val/{key[4:]}", state.logs[key], step)
        if state.epoch % self.histograms_every_epochs == 0:
            for name, param in state.model.named_parameters():
                self.writer.add_histogram(f"weight/{name}", param.numpy(), step)
                if param.grad is not None:
                    self.writer.add_histogram(f"grad/{name}", param.grad.numpy(), step)

    def on_train_end(self, state: Any) -> None:
        self.writer.flush()


def build_model(kind: str) -> nn.Module:
    if kind == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 2 * 2, 10))
    raise ValueError(f"unknown demo model {kind!r}; choose 'mlp' or 'cnn'")


def train_one(kind: str, logdir: str, epochs: int, seed: int, verbose: bool) -> float:
    """Train one demo model into ``logdir/<timestamp>-digits-<kind>``; returns its test accuracy."""
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

        class _Schedule:
            def on_epoch_end(self, state: Any) -> None:
                scheduler.step()

        history = engine.fit(model, F.cross_entropy, optimizer, train, epochs, val_data=test,
                             callbacks=(SummaryCallback(writer), _Schedule()), verbose=verbose)
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
