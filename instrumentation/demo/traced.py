"""A demo run's training loop under ``engine.function``: each step traced once per signature, then replayed, its
graphs written to the run (``plugins/graph/``) for the board's Graph page."""
from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import engine
from engine.nn import functional as F


def fit_traced(model: Any, optimizer: Any, train_data: Iterable[Any], epochs: int, run_dir: str, handle: Any,
               val_data: Iterable[Any], epoch_callbacks: Iterable[Any] = ()) -> Any:
    """``engine.fit``'s loop with the step (zero_grad, forward, cross-entropy, backward, optimizer step) traced by
    ``engine.function(logdir=run_dir)``; the loss goes to ``handle.log_loss`` each step, and each epoch ends as
    ``engine.fit`` ends it (``handle.on_epoch_end``, then the callbacks, with the validation loss and accuracy in
    ``state.logs``). Returns the traced step (its ``trace_count``, ``graphs()``)."""

    def train_step(x: engine.Tensor, y: engine.Tensor) -> engine.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    train_step.__qualname__ = "train_step"  # the graphs' name on the Graph page, not fit_traced.<locals>.train_step
    train_step = engine.function(train_step, logdir=run_dir)

    global_step = 0
    callbacks = (handle, *epoch_callbacks)
    for epoch in range(epochs):
        first = global_step
        for x, y in train_data:
            engine.hooks.mark_step_begin()
            loss = train_step(engine.tensor(x), engine.tensor(y))
            handle.log_loss(loss.item(), global_step)
            global_step += 1
        logs = _validation(model, val_data)
        state = SimpleNamespace(epoch=epoch, epochs=epochs, step=global_step - first, global_step=global_step,
                                logs=logs)
        for callback in callbacks:
            callback.on_epoch_end(state)
    return train_step


def _validation(model: Any, val_data: Iterable[Any]) -> dict[str, float]:
    """The sample-weighted mean cross-entropy and accuracy over ``val_data`` in eval mode, as ``engine.fit`` logs
    them (``val_loss``, ``val_accuracy``)."""
    loss_sum = correct = count = 0.0
    model.eval()
    try:
        with engine.no_grad():
            for x, y in val_data:
                output = model(engine.tensor(x))
                loss_sum += float(F.cross_entropy(output, engine.tensor(y)).item()) * len(y)
                correct += float((output.numpy().argmax(axis=1) == y).sum())
                count += len(y)
    finally:
        model.train()
    return {"val_loss": loss_sum / count, "val_accuracy": correct / count} if count else {}
