"""Watch: the handle watch() returns — an engine.hooks observer, an engine.fit callback, and close()."""
from __future__ import annotations

from typing import Any

import engine
from engine import hooks
from instrumentation.dynamics.activations import activation_stats, activation_tags, watched_layers
from instrumentation.dynamics.detectors import DynamicsRules
from instrumentation.dynamics.guard import FailureReporter
from instrumentation.dynamics.numerics import LOG_SPAN, NumericsObserver
from instrumentation.dynamics.parameters import ParameterTracker
from instrumentation.dynamics.step_scalars import StepScalars
from instrumentation.dynamics.thresholds import DynamicsThresholds
from instrumentation.format import tags as tag_names
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.profiler.spans import log_end, log_start

LOSS_TAG, LEARNING_RATE_TAG = "train/loss", "train/learning_rate"


class Watch:
    """Subscribed to the engine's step and optimizer hook points, with forward hooks on the model's leaf layers.

    Pass it to ``engine.fit(..., callbacks=[handle])`` to log the loss, or call ``log_loss`` in a hand-written
    loop. ``alerts`` lists what was reported (also appended to the run's ``plugins/alerts/alerts.jsonl``).
    ``attach(component)`` adds anything with a ``close()`` (a memory tracker, a profiler) to this handle's life.
    """

    def __init__(self, model: Any, writer: Any, *, every: int, histograms_every: int, optimizer: Any,
                 check_numerics: bool, raise_on_nonfinite: bool, thresholds: DynamicsThresholds) -> None:
        self.model, self.writer, self.every, self.histograms_every = model, writer, every, histograms_every
        self.optimizer = optimizer
        self.alerts: list[Alert] = []
        self.closed = False
        self._alert_writer = AlertWriter(writer.log_dir)
        self._rules = DynamicsRules(thresholds)
        self._guard = FailureReporter("flowscope.watch")
        self._named_parameters = list(model.named_parameters())
        self._ndims = {name: len(param.shape) for name, param in self._named_parameters}
        self._norm_tags = {name: (tag_names.GRAD_NORM + name, tag_names.UPDATE_RATIO + name)
                           for name, _ in self._named_parameters}
        self._tags_of_names: dict[tuple[str, ...], list[str]] = {}  # parameter names -> their tags, interleaved
        self._scalars = StepScalars(writer)
        self._tracker = ParameterTracker(self._named_parameters)
        self._tracking = False
        self._open_step: int | None = None
        self._last_step: int | None = None
        self._data_wait_ns = 0
        self._batch_size: int | None = None
        self._components: list[Any] = []
        self._handles = [module.register_forward_hook(self._layer_hook(path, type(module).__name__))
                         for path, module in watched_layers(model)]
        self._handles.append(model.register_forward_hook(self._batch_hook))
        self.numerics = NumericsObserver(self._report, raise_on_nonfinite) if check_numerics else None
        hooks.add_recorder(self)
        if self.numerics is not None:
            self.numerics.attach()

    # ---- lifetime -------------------------------------------------------------------------------------
    def attach(self, component: Any) -> Any:
        """Close ``component`` (anything with ``close()``) when this handle closes; returns it."""
        if not callable(getattr(component, "close", None)):
            raise TypeError(f"watch: attach() needs an object with close(), got {type(component).__name__}")
        self._components.append(component)
        return component

    def close(self) -> None:
        """Detach every hook and forward hook this handle added and close attached components; idempotent."""
        if self.closed:
            return
        self.closed = True
        hooks.remove_recorder(self)
        self._guard.call("writing the last scalars", self._scalars.flush)
        if self.numerics is not None:
            self.numerics.detach()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for component in reversed(self._components):
            self._guard.call(f"closing {type(component).__name__}", component.close)
        self._components.clear()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- loss -----------------------------------------------------------------------------------------
    def log_loss(self, value: Any, step: int | None = None) -> None:
        """Log the training loss; ``step`` defaults to the step in progress, or the one that just ended."""
        if step is None:
            step = self._open_step if self._open_step is not None else (self._last_step or 0)
        start = log_start()
        self._guard.call("log_loss", self._log_loss, float(value), int(step))
        log_end(LOG_SPAN, start)

    def _log_loss(self, value: float, step: int) -> None:
        self.writer.add_scalar(LOSS_TAG, value, step)
        for alert in self._rules.loss(step, value):
            self._report(alert)

    # ---- engine.fit callback ----------------------------------------------------------------------------
    def on_step_end(self, state: Any) -> None:
        if state.loss is not None:  # the optimizer step has closed the step: it is global_step - 1
            self._guard.call("on_step_end", self._log_loss, float(state.loss), max(int(state.global_step) - 1, 0))

    # ---- engine.hooks observer --------------------------------------------------------------------------
    def step_begin(self, event: hooks.StepEvent) -> None:
        self._open_step, self._data_wait_ns = event.step, 0

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self._data_wait_ns += event.wait_ns

    def step_end(self, event: hooks.StepEvent) -> None:
        start = log_start()
        self._step_end(event)
        log_end(LOG_SPAN, start)

    def _step_end(self, event: hooks.StepEvent) -> None:
        self._open_step, self._last_step = None, event.step
        if event.step % self.every:
            return
        step_time_ms = event.duration_ns / 1e6
        add = self._scalars.add
        add(tag_names.STEP_TIME_MS, step_time_ms, event.step)
        add(tag_names.DATA_TIME_MS, self._data_wait_ns / 1e6, event.step)
        if self._batch_size and step_time_ms > 0:
            add(tag_names.SAMPLES_PER_SEC, self._batch_size * 1e3 / step_time_ms, event.step)
        self._scalars.flush()

    def optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        start = log_start()
        self._optimizer_step_begin(event)
        log_end(LOG_SPAN, start)

    def optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        start = log_start()
        self._optimizer_step_end(event)
        log_end(LOG_SPAN, start)

    def _optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        if self.optimizer is not None and event.optimizer is not self.optimizer:
            return
        step = event.step
        self._tracking = step % self.every == 0
        if self._tracking:
            self._tracker.begin(step)
            groups = getattr(event.optimizer, "param_groups", None)
            if groups and "lr" in groups[0]:
                lr = float(groups[0]["lr"])
                self._scalars.add(LEARNING_RATE_TAG, lr, step)
                self._rules.observe_learning_rate(lr)
        if self.histograms_every and step % self.histograms_every == 0:
            self._scalars.flush()  # keep the file's order: this step's scalars so far, then the histograms
            for name, param in self._named_parameters:
                self.writer.add_histogram(tag_names.WEIGHT + name, param.numpy(), step)
                if param.grad is not None:
                    self.writer.add_histogram(tag_names.GRAD + name, param.grad.numpy(), step)

    def _optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        if self.optimizer is not None and event.optimizer is not self.optimizer:
            return
        stats = None
        if self._tracking:
            self._tracking = False
            stats = self._tracker.end()
        if self.numerics is not None:
            self.numerics.check_parameters(event.optimizer, event.step, self._named_parameters, stats)
        if stats is None:
            return
        tags = self._tags_of_names.get(stats.names)
        if tags is None:
            tags = self._tags_of_names[stats.names] = [tag for name in stats.names for tag in self._norm_tags[name]]
        values = [0.0] * len(tags)
        values[0::2], values[1::2] = stats.grad_norms, stats.update_ratios
        self._scalars.extend(tags, values, stats.step)
        for alert in self._rules.updates(stats.step, stats.names, stats.update_ratios, stats.grad_norms, self._ndims):
            self._report(alert)

    # ---- forward hooks ----------------------------------------------------------------------------------
    def _layer_hook(self, path: str, kind: str) -> Any:
        place, tags = f"activation stats of {path}", activation_tags(path)
        is_grad_enabled, current_step, call, layer_stats = (engine.is_grad_enabled, hooks.current_step,
                                                            self._guard.call, self._layer_stats)

        def hook(module: Any, inputs: tuple, output: Any) -> None:
            if module.training and is_grad_enabled() and current_step() % self.every == 0:
                start = log_start()
                call(place, layer_stats, path, kind, tags, output)
                log_end(LOG_SPAN, start)
        return hook

    def _layer_stats(self, path: str, kind: str, tags: tuple[str, str, str], output: Any) -> None:
        step = hooks.current_step()
        stats = activation_stats(path, kind, output.numpy())
        if stats.dead_fraction is not None:
            self._scalars.extend([tags[0], tags[1]], [stats.mean_abs, stats.dead_fraction], step)
            for alert in self._rules.dead(step, path, stats.dead_fraction):
                self._report(alert)
        elif stats.saturated_fraction is not None:
            self._scalars.extend([tags[0], tags[2]], [stats.mean_abs, stats.saturated_fraction], step)
        else:
            self._scalars.add(tags[0], stats.mean_abs, step)

    def _batch_hook(self, module: Any, inputs: tuple, output: Any) -> None:
        if module.training and inputs:
            shape = getattr(inputs[0], "shape", None)
            self._batch_size = int(shape[0]) if shape else None

    # ---- alerts -----------------------------------------------------------------------------------------
    def _report(self, alert: Alert) -> None:
        self.alerts.append(alert)
        self._alert_writer.write(alert)
