"""Watch: the handle watch() returns — an engine.hooks observer, an engine.fit callback, and close()."""
from __future__ import annotations

from time import perf_counter_ns as _now_ns
from typing import Any

import engine
from engine import hooks
from instrumentation.budget import Pacer
from instrumentation.dynamics.activations import activation_stats, activation_tags, watched_layers
from instrumentation.dynamics.detectors import DynamicsRules
from instrumentation.dynamics.guard import FailureReporter
from instrumentation.dynamics.nonfinite_counts import NonfiniteCounts
from instrumentation.dynamics.numerics import LOG_SPAN, NumericsObserver
from instrumentation.dynamics.parameters import ParameterTracker
from instrumentation.dynamics.step_scalars import ScalarSeries, StepScalars
from instrumentation.dynamics.thresholds import DynamicsThresholds
from instrumentation.format import tags as tag_names
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.profiler.spans import log_end

LOSS_TAG, LEARNING_RATE_TAG = "train/loss", "train/learning_rate"
HISTOGRAMS_SHARE = 0.15  # of a Watch's budget, for its histograms; the rest for the per-step statistics
BURST_STEPS = 32  # after a loss spike, steps observed whatever the interval: the evidence of what goes wrong


class Watch:
    """Subscribed to the engine's step and optimizer hook points, with forward hooks on the model's leaf layers.

    Pass it to ``engine.fit(..., callbacks=[handle])`` to log the loss, or call ``log_loss`` in a hand-written
    loop. ``alerts`` lists what was reported (also appended to the run's ``plugins/alerts/alerts.jsonl``).
    ``attach(component)`` adds anything with a ``close()`` (a memory tracker, a profiler) to this handle's life.

    ``every`` None: the steps between two runs of the statistics (``every``, read-only) and of the histograms (at
    least ``histograms_every``) are chosen by pacers (``instrumentation.budget``) from the measured cost of this
    handle's own work and the step time, to keep within ``budget`` of step time; an int fixes both intervals.
    """

    def __init__(self, model: Any, writer: Any, *, every: int | None, histograms_every: int, optimizer: Any,
                 check_numerics: bool, raise_on_nonfinite: bool, thresholds: DynamicsThresholds,
                 budget: float) -> None:
        self.model, self.writer, self.histograms_every = model, writer, histograms_every
        self._pace = Pacer(tag_names.WATCH_OBSERVER, budget * (1 - HISTOGRAMS_SHARE), every=every)
        self._histogram_pace = None if not histograms_every else Pacer(
            tag_names.HISTOGRAMS_OBSERVER, budget * HISTOGRAMS_SHARE, every=None if every is None else histograms_every,
            min_interval=histograms_every)
        self._fixed_ns = self._run_ns = self._histogram_ns = 0  # measured this step: always, statistics, histograms
        self._histograms_ran = False
        self._last_end_ns = 0
        self._burst_until = -1  # steps before it are observed whatever the interval (after a loss spike)
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
        self._losses = ScalarSeries(writer, LOSS_TAG)
        self._tracker = ParameterTracker(self._named_parameters, extremes=False)  # min/max are not written
        self._nonfinite = NonfiniteCounts()
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

    @property
    def every(self) -> int:
        """The steps between two runs of the statistics now (chosen by the budget unless ``every`` was given)."""
        return self._pace.interval

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
        self._guard.call("writing the last losses", self._losses.flush)
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
        began = _now_ns()
        self._guard.call("log_loss", self._log_loss, float(value), int(step))
        log_end(LOG_SPAN, began)
        self._fixed_ns += _now_ns() - began

    def _log_loss(self, value: float, step: int) -> None:
        self._losses.add(value, step)
        for alert in self._rules.loss(step, value):
            self._report(alert)
            if not self._pace.fixed:
                self._burst_until = max(self._burst_until, hooks.current_step() + BURST_STEPS)

    def _due(self, step: int) -> bool:
        return step % self._pace.interval == 0 or step < self._burst_until

    # ---- engine.fit callback ----------------------------------------------------------------------------
    def on_step_end(self, state: Any) -> None:
        if state.loss is not None:  # the optimizer step has closed the step: it is global_step - 1
            began = _now_ns()
            self._guard.call("on_step_end", self._log_loss, float(state.loss), max(int(state.global_step) - 1, 0))
            self._fixed_ns += _now_ns() - began

    # ---- engine.hooks observer --------------------------------------------------------------------------
    def step_begin(self, event: hooks.StepEvent) -> None:
        self._open_step, self._data_wait_ns = event.step, 0

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self._data_wait_ns += event.wait_ns

    def step_end(self, event: hooks.StepEvent) -> None:
        began = _now_ns()
        self._open_step, self._last_step = None, event.step
        due = self._due(event.step)
        if due:
            self._step_end(event)
        log_end(LOG_SPAN, began)
        # the pacers get the step's measured costs; the step time is the time since the last step end (the loop's
        # period), or the step's own duration
        step_ns = event.time_ns - self._last_end_ns if self._last_end_ns else event.duration_ns
        self._last_end_ns = event.time_ns
        if due:
            self._run_ns += _now_ns() - began
        else:
            self._fixed_ns += _now_ns() - began
        decided = self._pace.record(step_ns, self._fixed_ns, self._run_ns, due)
        histograms = self._histogram_pace
        if histograms is not None:
            if histograms.record(step_ns, 0, self._histogram_ns, self._histograms_ran):
                self._guard.call("logging the pace", self._log_pace, histograms, event.step)
            self._histogram_ns, self._histograms_ran = 0, False
        self._fixed_ns = self._run_ns = 0
        if decided:
            self._guard.call("logging the pace", self._log_pace, self._pace, event.step)

    def _log_pace(self, pacer: Pacer, step: int) -> None:
        """The figures of the pacer's last window (after it reconsidered its interval)."""
        self._scalars.extend(*pacer.last.scalars(), step)
        self._scalars.flush()

    def _step_end(self, event: hooks.StepEvent) -> None:
        step_time_ms = event.duration_ns / 1e6
        add = self._scalars.add
        add(tag_names.STEP_TIME_MS, step_time_ms, event.step)
        add(tag_names.DATA_TIME_MS, self._data_wait_ns / 1e6, event.step)
        if self._batch_size and step_time_ms > 0:
            add(tag_names.SAMPLES_PER_SEC, self._batch_size * 1e3 / step_time_ms, event.step)
        self._scalars.flush()
        self._losses.flush()

    def optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        step = event.step
        if step % self._pace.interval and step >= self._burst_until and (
                self._histogram_pace is None or step % self._histogram_pace.interval):
            self._tracking = False  # NOTE: the common step on a small model: nothing to do, nothing worth timing
            return
        began = _now_ns()
        self._optimizer_step_begin(event)
        log_end(LOG_SPAN, began)
        if self._tracking:
            self._run_ns += _now_ns() - began
        else:
            self._fixed_ns += _now_ns() - began

    def optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        if not self._tracking and self.numerics is None:
            return
        began, tracked = _now_ns(), self._tracking
        self._optimizer_step_end(event)
        log_end(LOG_SPAN, began)
        if tracked:
            self._run_ns += _now_ns() - began
        elif self.numerics is None:  # NOTE: the numerics check is a guard the user asked for: not the budget's
            self._fixed_ns += _now_ns() - began

    def _optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        if self.optimizer is not None and event.optimizer is not self.optimizer:
            return
        step = event.step
        self._tracking = self._due(step)
        if self._tracking:
            self._tracker.begin(step)
            groups = getattr(event.optimizer, "param_groups", None)
            if groups and "lr" in groups[0]:
                lr = float(groups[0]["lr"])
                self._scalars.add(LEARNING_RATE_TAG, lr, step)
                self._rules.observe_learning_rate(lr)
        if self._histogram_pace is not None and self._histogram_pace.due(step):
            began = _now_ns()
            self._scalars.flush()  # keep the file's order: this step's scalars so far, then the histograms
            for name, param in self._named_parameters:
                self.writer.add_histogram(tag_names.WEIGHT + name, param.numpy(), step)
                if param.grad is not None:
                    self.writer.add_histogram(tag_names.GRAD + name, param.grad.numpy(), step)
            self._histograms_ran = True
            self._histogram_ns += _now_ns() - began

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
        nonfinite_tags, counts = self._nonfinite.scalars(stats)
        if nonfinite_tags:
            self._scalars.extend(nonfinite_tags, counts, stats.step)
        for alert in self._rules.updates(stats.step, stats.names, stats.update_ratios, stats.grad_norms, self._ndims):
            self._report(alert)

    # ---- forward hooks ----------------------------------------------------------------------------------
    def _layer_hook(self, path: str, kind: str) -> Any:
        place, tags = f"activation stats of {path}", activation_tags(path)
        is_grad_enabled, current_step, call, layer_stats, due = (engine.is_grad_enabled, hooks.current_step,
                                                                 self._guard.call, self._layer_stats, self._due)

        def hook(module: Any, inputs: tuple, output: Any) -> None:
            if module.training and is_grad_enabled() and due(current_step()):
                began = _now_ns()
                call(place, layer_stats, path, kind, tags, output)
                log_end(LOG_SPAN, began)
                self._run_ns += _now_ns() - began
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
