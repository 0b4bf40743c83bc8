"""``engine.fit``: the training loop — epochs of steps, validation, metrics, a progress bar and callbacks.

A callback is any object with a subset of the methods ``on_train_begin``, ``on_step_begin``, ``on_step_end``,
``on_epoch_end`` and ``on_train_end``; each receives one :class:`FitState`. Callbacks are user code: an exception
raised in one is not caught — it ends ``fit`` and reaches the caller (unlike ``engine.hooks`` observers, whose
errors are reported and skipped). The one exception ``fit`` expects is :class:`StopTraining`, which ends training
cleanly after the current step or epoch (``on_train_end`` still runs).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
from tqdm import tqdm

from engine import hooks as _hooks
from engine.data import DatasetIterator
from engine.op import no_grad
from engine.backend import cuda_backend, is_device_array
from engine.tensor import Tensor

CALLBACK_METHODS = ("on_train_begin", "on_step_begin", "on_step_end", "on_epoch_end", "on_train_end")
METRICS = ("accuracy",)


class StopTraining(Exception):
    """Raise from a callback to end ``fit`` early; the history so far is returned."""


@dataclass(frozen=True, slots=True)
class FitState:
    """What every callback method receives.

    ``epoch`` counts from 0; ``step`` is the index of the training step within this ``fit`` call (from 0) and
    ``global_step`` the engine's step counter (``engine.hooks.current_step()``, which one ``optimizer.step()``
    advances). ``loss`` (float) and ``batch_size`` are set in ``on_step_end``, None elsewhere. ``logs`` is a
    fresh dict: in ``on_step_end`` the batch's ``loss`` and metrics; in ``on_epoch_end`` and ``on_train_end``
    the epoch's ``loss``, metrics and, with validation data, ``val_loss`` and ``val_<metric>``; empty otherwise.
    """

    model: Any
    optimizer: Any
    epoch: int
    epochs: int
    step: int
    global_step: int
    loss: float | None = None
    batch_size: int | None = None
    logs: dict[str, float] = field(default_factory=dict)


@dataclass
class History:
    """Per-epoch averages (over samples) and every step's loss, in training order."""

    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)

    @property
    def epochs(self) -> int:
        return len(self.loss)


def fit(model: Any, loss_fn: Callable[[Tensor, Tensor], Tensor], optimizer: Any, train_data: Iterable[Any],
        epochs: int, val_data: Iterable[Any] | None = None, callbacks: Iterable[Any] = (),
        metrics: Iterable[str] = ("accuracy",), verbose: bool = True) -> History:
    """Train ``model`` for ``epochs`` passes over ``train_data`` and return the :class:`History`.

    ``train_data`` and ``val_data`` are re-iterable collections of ``(x, y)`` batches (NumPy arrays or Tensors),
    e.g. an ``engine.data.Dataset``. Each step: ``mark_step_begin``, fetch a batch, ``zero_grad``, forward,
    ``loss_fn(output, y)``, ``backward``, ``optimizer.step()`` (which closes the step). Validation runs after
    each epoch under ``no_grad`` with ``model.eval()``. The progress bar (tqdm, stderr) shows the running loss
    and metrics; ``verbose=False`` turns it off. Metrics: ``"accuracy"`` (argmax of the output vs. integer
    labels, or vs. the argmax of one-hot/probability targets).
    """
    if int(epochs) != epochs or epochs < 0:
        raise ValueError(f"epochs must be a non-negative integer, got {epochs!r}")
    metrics = tuple(metrics)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known: {list(METRICS)}")
    dispatch = _Dispatch(tuple(callbacks), model, optimizer, int(epochs))
    history = History()
    model.train()
    step = 0
    dispatch("on_train_begin", epoch=0, step=0)
    logs: dict[str, float] = {}
    try:
        for epoch in range(int(epochs)):
            totals = _Totals(metrics)
            with _progress(train_data, epoch, int(epochs), verbose) as bar:
                for x, y in _batches(train_data, "train_data"):
                    dispatch("on_step_begin", epoch=epoch, step=step)
                    loss_value, batch_size, batch_logs = _train_step(model, loss_fn, optimizer, x, y, metrics)
                    history.step_losses.append(loss_value)
                    totals.add(loss_value, batch_size, batch_logs)
                    dispatch("on_step_end", epoch=epoch, step=step, loss=loss_value, batch_size=batch_size,
                             logs=batch_logs)
                    step += 1
                    bar.update(1)
                    bar.set_postfix(totals.means(), refresh=False)
                logs = totals.means()
                if val_data is not None:
                    logs.update({"val_" + k: v for k, v in evaluate(model, loss_fn, val_data, metrics).items()})
                bar.set_postfix(logs)
            _record(history, logs, metrics, val_data is not None)
            dispatch("on_epoch_end", epoch=epoch, step=step, logs=dict(logs))
    except StopTraining:
        pass
    dispatch("on_train_end", epoch=len(history.loss), step=step, logs=dict(logs))
    return history


def evaluate(model: Any, loss_fn: Callable[[Tensor, Tensor], Tensor], data: Iterable[Any],
             metrics: Iterable[str] = ("accuracy",)) -> dict[str, float]:
    """Sample-weighted mean loss and metrics over ``data`` under ``no_grad`` and ``model.eval()``; the model's
    previous mode is restored."""
    metrics = tuple(metrics)
    was_training = getattr(model, "training", True)
    totals = _Totals(metrics)
    model.eval()
    try:
        with no_grad():
            for x, y in _batches(data, "val_data", mark_steps=False):
                x_t, y_t = _as_tensor(x), _as_tensor(y)
                output = model(x_t)
                loss = loss_fn(output, y_t)
                totals.add(float(loss.item()), len(x_t._data), _metrics(output, y_t, metrics))
    finally:
        model.train(was_training)
    return totals.means()


def _train_step(model: Any, loss_fn: Callable, optimizer: Any, x: Any, y: Any,
                metrics: tuple[str, ...]) -> tuple[float, int, dict[str, float]]:
    x_t, y_t = _as_tensor(x), _as_tensor(y)
    optimizer.zero_grad()
    output = model(x_t)
    loss = loss_fn(output, y_t)
    loss.backward()
    optimizer.step()
    loss_value = float(loss.item())
    batch_logs = {"loss": loss_value}
    batch_logs.update(_metrics(output, y_t, metrics))
    return loss_value, len(x_t._data), batch_logs


def _batches(data: Iterable[Any], what: str, mark_steps: bool = True) -> Any:
    """Yield ``(x, y)`` from ``data``, opening each training step before its batch is fetched."""
    iterator = iter(data)
    reports_waits = isinstance(iterator, DatasetIterator)  # the Dataset reports its own waits
    while True:
        opened = mark_steps and not _hooks.step_is_open()
        if mark_steps:
            _hooks.mark_step_begin()
        start_ns = time.perf_counter_ns()
        try:
            batch = next(iterator)
        except StopIteration:
            if opened:
                _hooks.cancel_step_begin()  # the data is exhausted: no step begins here (as DatasetIterator does)
            return
        if mark_steps and not reports_waits:
            _hooks.report_data_wait(time.perf_counter_ns() - start_ns)
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError(f"{what} must yield (x, y) pairs, got {type(batch).__name__}"
                            + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""))
        yield batch


def _as_tensor(value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if is_device_array(value):  # a batch already on a GPU (Dataset.prefetch_to_device)
        return Tensor._wrap_array(cuda_backend.adopt(value), "input", "batch")
    return Tensor._wrap_array(np.asarray(value), "input", "batch")


def _metrics(output: Tensor, target: Tensor, metrics: tuple[str, ...]) -> dict[str, float]:
    if not metrics:
        return {}
    predicted = output.numpy().argmax(axis=1)
    labels = target.numpy()
    if labels.ndim == output.ndim and labels.dtype.kind == "f":
        labels = labels.argmax(axis=1)
    return {"accuracy": float(np.mean(predicted == labels))}


class _Totals:
    """Sample-weighted running sums of the loss and metrics over an epoch."""

    def __init__(self, metrics: tuple[str, ...]) -> None:
        self.sums = dict.fromkeys(("loss",) + metrics, 0.0)
        self.count = 0

    def add(self, loss: float, batch_size: int, metrics: dict[str, float]) -> None:
        self.count += batch_size
        self.sums["loss"] += loss * batch_size
        for name, value in metrics.items():
            if name != "loss" and name in self.sums:
                self.sums[name] += value * batch_size

    def means(self) -> dict[str, float]:
        if not self.count:
            return {}
        return {name: total / self.count for name, total in self.sums.items()}


def _record(history: History, logs: dict[str, float], metrics: tuple[str, ...], validated: bool) -> None:
    history.loss.append(logs.get("loss", float("nan")))
    if "accuracy" in metrics:
        history.accuracy.append(logs.get("accuracy", float("nan")))
    if validated:
        history.val_loss.append(logs.get("val_loss", float("nan")))
        if "accuracy" in metrics:
            history.val_accuracy.append(logs.get("val_accuracy", float("nan")))


class _Dispatch:
    """Calls the callbacks' methods for one event with a fresh :class:`FitState`."""

    def __init__(self, callbacks: tuple[Any, ...], model: Any, optimizer: Any, epochs: int) -> None:
        for callback in callbacks:
            if not any(callable(getattr(callback, name, None)) for name in CALLBACK_METHODS):
                raise TypeError(f"callback {callback!r} has none of the methods {', '.join(CALLBACK_METHODS)}")
        self.methods = {name: [getattr(c, name) for c in callbacks if callable(getattr(c, name, None))]
                        for name in CALLBACK_METHODS}
        self.model, self.optimizer, self.epochs = model, optimizer, epochs

    def __call__(self, event: str, *, epoch: int, step: int, loss: float | None = None,
                 batch_size: int | None = None, logs: dict[str, float] | None = None) -> None:
        methods = self.methods[event]
        if not methods:
            return
        state = FitState(self.model, self.optimizer, epoch, self.epochs, step, _hooks.current_step(), loss,
                         batch_size, dict(logs) if logs else {})
        for method in methods:
            method(state)


def _progress(data: Iterable[Any], epoch: int, epochs: int, verbose: bool) -> tqdm:
    try:
        total: int | None = len(data)  # type: ignore[arg-type]
    except TypeError:
        total = None
    return tqdm(total=total, desc=f"epoch {epoch + 1}/{epochs}", unit="step", file=sys.stderr, disable=not verbose,
                dynamic_ncols=True, leave=True)
