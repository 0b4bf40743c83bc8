"""The demo's runs: one healthy baseline and one run per failure the board explains, each a function of
``(run_dir, seed)`` that trains on the digits with the real instrumentation and returns a one-line outcome."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import engine
from engine import nn
from engine.nn import functional as F
from instrumentation.demo import media, multirank
from instrumentation.demo.traced import fit_traced
from instrumentation.demo.common import (EpochSchedule, ValidationLogger, accuracy, digits, instrumented,
                                         start_run)
from instrumentation.format import alert_names as kinds
from instrumentation.profiler import profile, schedule

HPARAM_ACCURACY = "hparam/test_accuracy"


@dataclass(frozen=True, slots=True)
class DemoRun:
    """A run of the demo: its directory name, what it shows, the alert kinds it is built to raise (none for the
    baseline) and the function that trains it."""

    name: str
    shows: str
    expected_alerts: tuple[str, ...]
    train: Callable[[str, int], str]


def mlp(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def _finish(writer: object, model: nn.Module, seed: int, hparams: dict, outcome: str) -> str:
    data = digits(seed)
    score = accuracy(model, data.x_test, data.y_test)
    writer.add_hparams({**hparams, "seed": seed}, {HPARAM_ACCURACY: score})
    return f"{outcome}; test accuracy {score:.3f}"


# --- the healthy baseline ------------------------------------------------------------------------------------------
def baseline(run_dir: str, seed: int, epochs: int = 2) -> str:
    """The digits CNN with Adam and a cosine schedule: every curve as it should look, one profile capture, no
    alert. (A CNN: its steps are long enough that the input-bound check sees a pipeline that keeps up.)"""
    start_run(seed)
    data, model = digits(seed), nn.DigitsCNN()
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = engine.optim.CosineAnnealingLR(optimizer, T_max=epochs)
    with instrumented(run_dir, model, seed) as (writer, handle):
        with profile(run_dir, schedule=schedule(wait=10, warmup=2, active=5)):
            engine.fit(model, F.cross_entropy, optimizer, data.train(seed=seed), epochs, val_data=data.test(),
                       callbacks=(handle, ValidationLogger(writer), EpochSchedule(scheduler)), verbose=False)
        return _finish(writer, model, seed, {"model": "cnn", "optimizer": "adam", "lr": 3e-3},
                       "healthy")


# --- a learning rate that explodes ---------------------------------------------------------------------------------
class StopWhenDiverged:
    """Ends ``engine.fit`` ``after`` steps once the loss is not finite or ``factor`` times the first one (what a
    user watching the loss would do)."""

    def __init__(self, factor: float = 10.0, after: int = 5) -> None:
        self.factor, self.after = factor, after
        self.first: float | None = None
        self.diverged_at: int | None = None

    def on_step_end(self, state: object) -> None:
        loss, step = state.loss, state.global_step
        if self.first is None:
            self.first = loss
        if self.diverged_at is None and (not math.isfinite(loss) or loss > self.factor * self.first):
            self.diverged_at = step
        if self.diverged_at is not None and step >= self.diverged_at + self.after:
            raise engine.StopTraining


def lr_explodes(run_dir: str, seed: int, epochs: int = 3) -> str:
    """SGD whose step schedule multiplies the learning rate by 100 after the first epoch (``gamma=100`` where 0.01
    was meant): the next update is larger than the weights it changes (‖Δw‖/‖w‖ > 1) and the loss leaves its
    median; training is stopped once the loss has diverged."""
    start_run(seed)
    data, model = digits(seed), mlp()
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = engine.optim.StepLR(optimizer, step_size=1, gamma=100.0)
    with instrumented(run_dir, model, seed) as (writer, handle):
        engine.fit(model, F.cross_entropy, optimizer, data.train(seed=seed), epochs, val_data=data.test(),
                   callbacks=(handle, ValidationLogger(writer), EpochSchedule(scheduler), StopWhenDiverged()),
                   verbose=False)
        return _finish(writer, model, seed, {"model": "mlp", "optimizer": "sgd", "lr": 0.05},
                       f"diverged at step {engine.hooks.current_step()}")


# --- a layer whose ReLUs die ---------------------------------------------------------------------------------------
def dead_relu(run_dir: str, seed: int, epochs: int = 2) -> str:
    """The second hidden layer's biases start at -0.3 (a bad init): most of its ReLUs are never positive, get no
    gradient and stay dead; the network learns through the few left."""
    start_run(seed)
    data = digits(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    nn.init.constant_(model[2].bias, -0.3)
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    with instrumented(run_dir, model, seed) as (writer, handle):
        engine.fit(model, F.cross_entropy, optimizer, data.train(seed=seed), epochs, val_data=data.test(),
                   callbacks=(handle, ValidationLogger(writer)), verbose=False)
        return _finish(writer, model, seed, {"model": "mlp", "optimizer": "adam", "lr": 1e-3}, "trained")


# --- a NaN and where it came from ----------------------------------------------------------------------------------
RARE_PIXEL_SHARE = 0.10  # pixels inked in fewer training images than this are dropped (the always-blank ones gave NaN)


class BatchStandardize(nn.Module):
    """Standardises each batch per feature, ``(x - mean) / std`` with no epsilon: a feature that is the same in every
    sample of a batch has std 0, and 0/0 is NaN."""

    def forward(self, x: engine.Tensor) -> engine.Tensor:
        centred = x - x.mean(axis=0, keepdims=True)
        return centred / (centred ** 2).mean(axis=0, keepdims=True).sqrt()


class StandardizedMLP(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.standardize = BatchStandardize()
        self.hidden = nn.Linear(features, 128)
        self.relu = nn.ReLU()
        self.out = nn.Linear(128, 10)

    def forward(self, x: engine.Tensor) -> engine.Tensor:
        return self.out(self.relu(self.hidden(self.standardize(x))))


def nan_origin(run_dir: str, seed: int, epochs: int = 3) -> str:
    """Per-batch standardisation without an epsilon, on the pixels inked in at least 10 % of the training images:
    the first batch in which one of them is blank in all 32 images divides 0 by 0. ``check_numerics`` names that op,
    its module and step, then raises ``engine.NonFiniteError``, which ends the run."""
    start_run(seed)
    data = digits(seed)
    kept = (data.x_train > 0).mean(axis=0) >= RARE_PIXEL_SHARE
    train = (engine.data.Dataset.from_tensor_slices((data.x_train[:, kept], data.y_train))
             .shuffle(len(data.x_train), seed=seed).batch(32))
    model = StandardizedMLP(int(kept.sum()))
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3)
    with instrumented(run_dir, model, seed, check_numerics=True) as (writer, handle):
        try:
            with np.errstate(invalid="ignore"):  # the warning would say less than the alert
                engine.fit(model, F.cross_entropy, optimizer, train, epochs, callbacks=(handle,), verbose=False)
            outcome = "no NaN (unexpected)"
        except engine.NonFiniteError as error:
            outcome = f"stopped by NonFiniteError at step {error.step}: {error.op} in {error.module!r}"
        writer.add_hparams({"model": "mlp", "optimizer": "adam", "lr": 3e-3, "seed": seed}, {})
        return outcome


# --- an input-bound pipeline ---------------------------------------------------------------------------------------
def jitter(image: np.ndarray, label: np.int64, shift: float = 0.4) -> tuple[np.ndarray, np.int64]:
    """Moves an 8×8 digit by a random sub-pixel offset with bilinear interpolation, one pixel at a time in Python:
    correct, and slow enough that the model waits for it."""
    rng = np.random.default_rng(int(image.sum() * 1000) % (2**32))
    dy, dx = rng.uniform(-shift, shift, size=2)
    grid = image.reshape(8, 8).tolist()
    out = [0.0] * 64
    for row in range(8):
        for col in range(8):
            y, x = row + dy, col + dx
            y0, x0 = int(math.floor(y)), int(math.floor(x))
            fy, fx = y - y0, x - x0
            value = 0.0
            for yy, wy in ((y0, 1 - fy), (y0 + 1, fy)):
                for xx, wx in ((x0, 1 - fx), (x0 + 1, fx)):
                    if 0 <= yy < 8 and 0 <= xx < 8:
                        value += wy * wx * grid[yy][xx]
            out[row * 8 + col] = value
    return np.asarray(out, dtype=np.float32), label


INPUT_BOUND_STEPS = 30  # the check looks at windows of 20 steps


def input_bound(run_dir: str, seed: int, epochs: int = 1) -> str:
    """A pure-Python augmentation in ``map()`` on the training thread: each step waits longer for its batch than
    it computes. The profiler's input-bound check sees it; a capture covers the steps of its alert."""
    start_run(seed)
    data, model = digits(seed), mlp()
    train = (engine.data.Dataset.from_tensor_slices((data.x_train, data.y_train)).shuffle(len(data.x_train), seed=seed)
             .map(jitter).batch(32).take(INPUT_BOUND_STEPS))
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3)
    with instrumented(run_dir, model, seed) as (writer, handle):
        with profile(run_dir, schedule=schedule(wait=14, warmup=2, active=8)):
            engine.fit(model, F.cross_entropy, optimizer, train, epochs, val_data=data.test(),
                       callbacks=(handle, ValidationLogger(writer)), verbose=False)
        return _finish(writer, model, seed, {"model": "mlp", "optimizer": "adam", "lr": 3e-3}, "trained")


# --- a leak --------------------------------------------------------------------------------------------------------
def leak(run_dir: str, seed: int, epochs: int = 2) -> str:
    """A hand-written loop that keeps every batch's logits (the Tensor, not ``.numpy().argmax(1)``) for a confusion
    matrix at the end: live memory grows by one activation per step, and the memory tracker names the line."""
    start_run(seed)
    data, model = digits(seed), mlp()
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3)
    outputs, labels = [], []
    with instrumented(run_dir, model, seed, memory_stacks=True) as (writer, handle):
        for _ in range(epochs):
            for x, y in data.train(seed=seed):
                optimizer.zero_grad()
                logits = model(engine.tensor(x))
                loss = F.cross_entropy(logits, engine.tensor(y))
                loss.backward()
                optimizer.step()
                handle.log_loss(loss.item())
                outputs.append(logits)  # the leak: every step's logits stay alive until the end
                labels.append(y)
        predicted = np.concatenate([o.numpy().argmax(axis=1) for o in outputs])
        train_accuracy = float((predicted == np.concatenate(labels)).mean())
        return _finish(writer, model, seed, {"model": "mlp", "optimizer": "adam", "lr": 3e-3},
                       f"kept {len(outputs)} logits tensors; running train accuracy {train_accuracy:.3f}")


# --- out of memory -------------------------------------------------------------------------------------------------
MEMORY_LIMIT_BYTES = 3 * 2**20


def out_of_memory(run_dir: str, seed: int) -> str:
    """The CNN under a 3 MiB engine memory limit (``engine.memory.set_limit``) with a batch size that doubles each
    epoch: 64 and 128 fit, the first batch of 256 does not. The memory tracker writes the OOM snapshot and alert,
    then ``engine.OutOfMemoryError`` ends the run."""
    start_run(seed)
    data, model = digits(seed), nn.DigitsCNN()
    optimizer = engine.optim.Adam(model.parameters(), lr=3e-3)
    engine.memory.set_limit(MEMORY_LIMIT_BYTES)
    try:
        with instrumented(run_dir, model, seed, memory_stacks=True) as (writer, handle):
            try:
                for epoch in range(5):
                    engine.fit(model, F.cross_entropy, optimizer, data.train(64 * 2**epoch, seed=seed), 1,
                               callbacks=(handle,), verbose=False)
                outcome = "no OOM (unexpected)"
            except engine.OutOfMemoryError as error:
                outcome = f"OutOfMemoryError at step {engine.hooks.current_step()}: {error}"
            engine.memory.set_limit(None)
            writer.add_hparams({"model": "cnn", "optimizer": "adam", "lr": 3e-3, "seed": seed}, {})
            return outcome.split("\n")[0]
    finally:
        engine.memory.set_limit(None)


# --- hyperparameters, text and images ------------------------------------------------------------------------------
class MediaLogger:
    """An ``engine.fit`` callback logging, at each epoch end, the media of ``media.log_epoch`` on the test set."""

    def __init__(self, writer: object, model: nn.Module, seed: int) -> None:
        self.writer, self.model, self.data = writer, model, digits(seed)

    def on_epoch_end(self, state: object) -> None:
        self.model.eval()
        try:
            with engine.no_grad():
                probabilities = F.softmax(self.model(engine.tensor(self.data.x_test)), dim=1).numpy()
        finally:
            self.model.train()
        media.log_epoch(self.writer, state.global_step, state.epoch, self.data.x_test, self.data.y_test, probabilities)


def media_run(run_dir: str, seed: int, epochs: int = 2) -> str:
    """A wider MLP with dropout whose hyperparameters, model summary, per-epoch report, misclassified digits and
    precision-recall curves are logged (the HParams, Text, Images and PR curves pages); healthy, so no alert. Its
    steps run under ``engine.function`` (one signature: full batches only), so its traced and optimised graphs are
    written (the Graph page), with a profile capture of replayed steps that colours them by time."""
    start_run(seed)
    data = digits(seed)
    hparams = {"model": "mlp", "optimizer": "adam", "lr": 2e-3, "hidden": 256, "dropout": 0.2}
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))
    optimizer = engine.optim.Adam(model.parameters(), lr=hparams["lr"])
    with instrumented(run_dir, model, seed) as (writer, handle):
        writer.add_text("model", f"```\n{model.summary(input_shape=(1, 64))}\n```", 0)
        train = data.train(seed=seed, drop_remainder=True)  # one batch shape: one traced signature
        with profile(run_dir, schedule=schedule(wait=10, warmup=2, active=3), input_bound=False):
            fit_traced(model, optimizer, train, epochs, run_dir, handle, data.test(),
                       (ValidationLogger(writer), MediaLogger(writer, model, seed)))
        return _finish(writer, model, seed, hparams, "trained")


RUNS = (
    DemoRun("baseline", "a healthy CNN: the curves as they should look, a profile capture", (), baseline),
    DemoRun("lr-explodes", "a step schedule with gamma=100: the update ratio crosses 1, the loss spikes",
            (kinds.EXPLODING_GRADIENT, kinds.LOSS_SPIKE), lr_explodes),
    DemoRun("dead-relu", "a layer initialised with negative biases: most of its ReLUs never fire",
            (kinds.DEAD_UNITS,), dead_relu),
    DemoRun("nan-origin", "0/0 in a per-batch standardisation, found by check_numerics", (kinds.NONFINITE,),
            nan_origin),
    DemoRun("input-bound", "a pure-Python augmentation in map(): steps wait for their batches",
            (kinds.INPUT_BOUND,), input_bound),
    DemoRun("logits-leak", "every step's logits kept in a list", (kinds.LEAK,), leak),
    DemoRun("out-of-memory", "a batch size that doubles each epoch under a 3 MiB engine memory limit", (kinds.OOM,),
            out_of_memory),
    DemoRun("ranks-straggler", "2 data-parallel ranks on MPI, rank 1 slow: the multi-rank view finds it",
            (kinds.STRAGGLER,), multirank.straggler),
    DemoRun("hparams-media", "hyperparameters, a markdown report, misclassified digits, PR curves; trained under "
            "engine.function: its graph", (), media_run),
)
