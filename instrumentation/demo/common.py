"""What every demo run shares: a fresh run directory, the digits data, the instrumentation, small fit callbacks."""
from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

import engine
from instrumentation.monitor import watch
from instrumentation.summary import SummaryWriter
from instrumentation.system import SystemSampler

MARKER = ".flowscope-demo"  # in each run directory the demo wrote: a later demo may replace that directory, no other
BATCH_SIZE = 32


@dataclass(frozen=True, slots=True)
class Digits:
    """The bundled digits, split once per seed: x float32 (n, 64) in [0, 1], y int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def train(self, batch_size: int = BATCH_SIZE, seed: int = 0, drop_remainder: bool = False) -> engine.data.Dataset:
        return (engine.data.Dataset.from_tensor_slices((self.x_train, self.y_train))
                .shuffle(len(self.x_train), seed=seed).batch(batch_size, drop_remainder))

    def test(self, batch_size: int = 256) -> engine.data.Dataset:
        return engine.data.Dataset.from_tensor_slices((self.x_test, self.y_test)).batch(batch_size)


_digits: dict[int, Digits] = {}


def digits(seed: int) -> Digits:
    if seed not in _digits:
        (x_train, y_train), (x_test, y_test) = engine.datasets.load_digits(seed=seed)
        _digits[seed] = Digits(x_train, y_train, x_test, y_test)
    return _digits[seed]


def fresh_run_dir(logdir: str, name: str) -> str:
    """``logdir/name``, emptied first when an earlier demo wrote it (it holds the marker); refused otherwise."""
    run_dir = os.path.join(logdir, name)
    if os.path.lexists(run_dir):
        if not os.path.isfile(os.path.join(run_dir, MARKER)) or os.path.islink(run_dir):
            raise FileExistsError(f"demo: {run_dir} exists and was not written by the demo; choose another --logdir")
        shutil.rmtree(run_dir)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, MARKER), "w", encoding="utf-8") as handle:
        handle.write("written by python -m instrumentation.demo; a later demo replaces this directory\n")
    return run_dir


@contextmanager
def instrumented(run_dir: str, model: Any, seed: int, **watch_options: Any) -> Iterator[tuple[SummaryWriter, Any]]:
    """A writer, ``watch(model, writer)`` (dynamics, alerts, memory tracker, capture requests) and the system sampler
    for one run; the engine's step counter starts at 0 and the previous run's garbage is gone."""
    with SummaryWriter(run_dir) as writer:
        handle = watch(model, writer, histograms_every=20, **watch_options)
        handle.attach(SystemSampler(writer, interval=0.5))
        try:
            yield writer, handle
        finally:
            handle.close()


def start_run(seed: int) -> None:
    """Before a run builds its model: free the previous run's reference cycles (else its live blocks would show in
    this run's memory, stamped with the old step numbers), count steps from 0, seed the engine."""
    gc.collect()
    engine.hooks.reset_step()
    engine.manual_seed(seed)


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


def accuracy(model: Any, x: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    try:
        with engine.no_grad():
            return float((model(engine.tensor(x)).numpy().argmax(axis=1) == y).mean())
    finally:
        model.train()
