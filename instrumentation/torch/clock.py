"""TorchSteps: the steps of a torch training loop, from its optimizer's step hooks and its model's forward pre-hook,
with the part of ``engine.hooks``' interface a ``Watch`` reads (step clock and recorder list)."""
from __future__ import annotations

from time import perf_counter_ns as _now_ns
from typing import Any

import torch

from engine.hooks import DataWaitEvent, OptimizerEvent, StepEvent
from instrumentation.dynamics.guard import FailureReporter

EVENTS = ("data_wait", "optimizer_step_begin", "optimizer_step_end", "step_end")


class TorchSteps:
    """A step ends with ``optimizer.step()`` (its step post hook; any optimizer's when ``optimizer`` is None) and
    begins where the one before ended (the first at the model's first training forward). Its data time is the
    wait from the end of the step before to the model's first training forward (a forward with gradients on, the
    model in training mode): the input pipeline, and whatever else the loop does between the two. Recorders added
    with ``add_recorder`` get ``data_wait``, ``optimizer_step_begin``, ``optimizer_step_end`` and ``step_end``
    with the engine's event types; a recorder's failure is reported once and skipped (not a
    ``engine.hooks.PropagatingError``: it stops training). ``in_optimizer``: inside ``optimizer.step()`` now."""

    step_resets = 0  # NOTE: a torch loop has no reset_step: its steps count from the watch() call

    def __init__(self, model: Any, optimizer: Any = None) -> None:
        self.model = model
        self._step = 0
        self._open = False
        self.in_optimizer = False
        self._start_ns = 0
        self._last_end_ns: int | None = None
        self._recorders: list[Any] = []
        self._methods: dict[str, tuple[tuple[str, Any], ...]] = {event: () for event in EVENTS}
        self._guard = FailureReporter("flowscope.watch (torch)")
        self._handles = [model.register_forward_pre_hook(self._forward_begins)]
        if optimizer is None:
            from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

            self._handles += [register_optimizer_step_pre_hook(self._optimizer_begins),
                              register_optimizer_step_post_hook(self._optimizer_ends)]
        else:
            self._handles += [optimizer.register_step_pre_hook(self._optimizer_begins),
                              optimizer.register_step_post_hook(self._optimizer_ends)]

    # ---- engine.hooks' interface -----------------------------------------------------------------------
    def current_step(self) -> int:
        """The step in progress, or the next one between steps (0 before the first ``optimizer.step()``)."""
        return self._step

    def step_is_open(self) -> bool:
        return self._open

    def step_of_record(self) -> int:
        """The step a value recorded now belongs to: the step in progress, or the one that just ended."""
        return self._step if self._open or not self._step else self._step - 1

    def add_recorder(self, recorder: Any) -> Any:
        if not any(r is recorder for r in self._recorders):
            self._recorders.append(recorder)
            self._rebuild()
        return recorder

    def remove_recorder(self, recorder: Any) -> None:
        kept = [r for r in self._recorders if r is not recorder]
        if len(kept) != len(self._recorders):
            self._recorders = kept
            self._rebuild()

    def _rebuild(self) -> None:
        self._methods = {event: tuple((f"{event} of {type(r).__name__}", getattr(r, event))
                                      for r in self._recorders if callable(getattr(r, event, None)))
                         for event in EVENTS}

    def close(self) -> None:
        """Remove the torch hooks; idempotent."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._recorders = []
        self._rebuild()

    # ---- torch's hooks -----------------------------------------------------------------------------------
    def _emit(self, event: str, argument: Any) -> None:
        for place, method in self._methods[event]:
            self._guard.call(place, method, argument)

    def _begin(self, now: int) -> None:
        self._open = True
        self._start_ns = now if self._last_end_ns is None else self._last_end_ns

    def _forward_begins(self, module: Any, args: Any) -> None:
        if self._open or not module.training or not torch.is_grad_enabled():
            return
        now = _now_ns()
        self.in_optimizer = False
        self._begin(now)
        if self._last_end_ns is not None and self._methods["data_wait"]:
            self._emit("data_wait", DataWaitEvent(self._step, now - self._last_end_ns, now))

    def _optimizer_begins(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        now = _now_ns()
        if not self._open:
            self._begin(now)
        self.in_optimizer = True
        if self._methods["optimizer_step_begin"]:
            self._emit("optimizer_step_begin", OptimizerEvent(optimizer, self._step, now))

    def _optimizer_ends(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        now = _now_ns()
        self.in_optimizer = False
        step = self._step
        try:
            if self._methods["optimizer_step_end"]:
                self._emit("optimizer_step_end", OptimizerEvent(optimizer, step, now))
            if self._methods["step_end"]:
                self._emit("step_end", StepEvent(step, now, now - self._start_ns))
        finally:
            self._open = False
            self._step = step + 1
            self._last_end_ns = _now_ns()  # NOTE: after the recorders: their work is no data wait
