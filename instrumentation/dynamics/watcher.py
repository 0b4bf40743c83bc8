"""Watch: the handle watch() returns — an engine recorder, an engine.fit callback, and close().

Sampling (docs/dynamics.md, *How a step is sampled*): the statistics run on the steps the pacers choose, and only
those steps pay for them. The handle's one permanent recorder method is ``step_end``; on a step that is not sampled
it returns after one comparison. At the end of the step before a sampled one the handle *arms*: it adds its
sampler (optimizer hook points, data waits) to the engine's recorders and puts forward hooks on the watched
layers; at the end of the sampled step it writes that step's scalars, gives the pacers the window's measured
costs and disarms (unless the next step is sampled too). What runs at every step: ``log_loss`` (the loss is
never thinned) and, with ``check_numerics``, the numerics check (a guard).
"""
from __future__ import annotations

import functools
from time import perf_counter_ns as _now_ns
from time import thread_time_ns as _thread_ns
from time import time as _wall
from typing import Any

import engine
from engine import hooks
from engine.hooks import PropagatingError
from instrumentation.budget import Pacer
from instrumentation.dynamics.activations import activation_stats, activation_tags, watched_layers
from instrumentation.dynamics.detectors import DynamicsRules
from instrumentation.dynamics.guard import FailureReporter
from instrumentation.dynamics.histograms import write_histogram
from instrumentation.dynamics.nonfinite_counts import NonfiniteCounts
from instrumentation.dynamics.numerics import LOG_SPAN, NumericsObserver
from instrumentation.dynamics.parameters import ParameterTracker
from instrumentation.dynamics.step_scalars import ScalarSeries, StepScalars
from instrumentation.dynamics.thresholds import DynamicsThresholds
from instrumentation.format import tags as tag_names
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.profiler.spans import log_end, recording

LOSS_TAG, LEARNING_RATE_TAG = "train/loss", "train/learning_rate"
_NEG_INF = float("-inf")
HISTOGRAMS_SHARE = 0.15  # of a Watch's budget, for its histograms; the rest for the per-step statistics
LOSS_BATCH = 64  # losses handed to the writer in one item (one add_scalar_rows of one tag)
LOSS_LATENCY_S = 2.0  # losses older than this are handed to the writer at a sampled step's end
BURST_STEPS = 32  # after a loss spike, steps observed whatever the interval: the evidence of what goes wrong
# Of the budget, what the handle's measured work may take: it times all it does at every step and on sampled steps;
# the rest is for the engine calling its one step_end and the writer thread encoding what it logged.
MEASURED_SHARE = 0.6
# What the sampled steps keep of it when the loss alone takes it all (a tiny step): the budget is what matters,
# the interval is at most 1000 steps and a pathology seen once is confirmed at the next steps (_next_sample).
MIN_RUN_SHARE = 0.1
# What a sampled step costs in all, over what the handle times of it: arming puts the sampler and forward hooks in the
# engine's paths, and the steps after a sampled one run in caches its work has cooled. Measured on the digits MLP
# (docs/budget.md): statistics every 10 steps cost 1.7-2x the run cost the pacer was given.
RUN_WEIGHT = 2.0


class _Sampler:
    """The recorder a Watch adds to the engine's list for the steps it samples (with ``check_numerics``: for every
    step, the parameters' check being a guard): the optimizer's hook points and the data waits."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch

    def optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        self.watch._optimizer_step_begin(event)

    def optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        self.watch._optimizer_step_end(event)

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self.watch._data_wait_ns += event.wait_ns


class Watch:
    """An engine recorder (``step_end``) with a sampler armed for the sampled steps (see the module docstring).

    Pass it to ``engine.fit(..., callbacks=[handle])`` to log the loss, or call ``log_loss`` in a hand-written
    loop. ``alerts`` lists what was reported (also appended to the run's ``plugins/alerts/alerts.jsonl``).
    ``attach(component)`` adds anything with a ``close()`` (a memory tracker, a profiler) to this handle's life.

    ``every`` None: the steps between two runs of the statistics (``every``, read-only) and of the histograms (at
    least ``histograms_every``) are chosen by pacers (``instrumentation.budget``) from the measured cost of this
    handle's own work and the step time, to keep within ``budget`` of step time; an int fixes both intervals.
    """

    def __init__(self, model: Any, writer: Any, *, every: int | None, histograms_every: int, optimizer: Any,
                 check_numerics: bool, raise_on_nonfinite: bool, thresholds: DynamicsThresholds,
                 budget: float, clock: Any = None) -> None:
        self._hooks = hooks if clock is None else clock  # the step clock and recorder list (engine.hooks' interface)
        self.model, self.writer, self.histograms_every = model, writer, histograms_every
        self._pace = Pacer(tag_names.WATCH_OBSERVER, budget * (1 - HISTOGRAMS_SHARE), every=every,
                           measured_share=MEASURED_SHARE, min_run_share=MIN_RUN_SHARE, run_weight=RUN_WEIGHT)
        self._histogram_pace = None if not histograms_every else Pacer(
            tag_names.HISTOGRAMS_OBSERVER, budget * HISTOGRAMS_SHARE, every=None if every is None else histograms_every,
            min_interval=histograms_every, measured_share=MEASURED_SHARE, min_run_share=MIN_RUN_SHARE,
            run_weight=RUN_WEIGHT)
        # measured since the last sampled step's end: at every step (the loss), on sampled steps, histograms
        self._fixed_ns = self._run_ns = self._histogram_ns = 0
        self._histograms_ran = False
        self._burst_until = -1  # steps before it are observed whatever the interval (after a loss spike, an alert)
        self._final_step = -1  # engine.fit's last step, once known (after the next-to-last epoch): sampled too
        self._epoch_end_step: int | None = None  # the fit's step count at the last on_epoch_end
        self._last_stats_step = self._last_histogram_step = -1  # the last steps with statistics / histograms written
        self.optimizer = optimizer
        self._stepped_optimizer: Any = None  # the optimizer of the last sampled step
        self.alerts: list[Alert] = []
        self.closed = self.paused = False
        self.step_times_elsewhere = False  # a RankMonitor writes perf/step_time_ms and perf/data_time_ms at every step
        self._alert_writer = AlertWriter(writer.log_dir)
        self._rules = DynamicsRules(thresholds)
        self._spike_rule = self._rules.loss_rule  # judged at every log_loss
        self._guard = FailureReporter("flowscope.watch")
        self._named_parameters = self._parameters_of(model)
        self._ndims = {name: len(param.shape) for name, param in self._named_parameters}
        self._norm_tags = {name: (tag_names.GRAD_NORM + name, tag_names.UPDATE_RATIO + name)
                           for name, _ in self._named_parameters}
        self._tags_of_names: dict[tuple[str, ...], list[str]] = {}  # parameter names -> their tags, interleaved
        self._scalars = StepScalars(writer)
        self._losses = ScalarSeries(writer, LOSS_TAG)
        # (value, step, wall time) kept by log_loss until LOSS_BATCH (or LOSS_LATENCY_S) for the writer
        self._kept_losses: list[tuple[float, int, float]] = []
        self._wall_offset_s = _wall() - _now_ns() * 1e-9  # time.time() - perf_counter: a loss's wall time
        self._tracker = ParameterTracker(self._named_parameters, extremes=False)  # min/max are not written
        self._nonfinite = NonfiniteCounts()
        self._tracking = False
        self._data_wait_ns = 0
        self._batch_size: int | None = None
        self._components: list[Any] = []
        self._captures: list[Any] = []  # OnDemandCapture: checked at the sampled steps' ends
        # forward hooks, put on the modules only for the steps whose statistics are due (``_arm``)
        self._forward_hooks = [(module, functools.partial(self._layer_output, f"activation stats of {path}", path,
                                                          type(module).__name__, activation_tags(path)))
                               for path, module in watched_layers(model)]
        self._forward_hooks.append((model, self._batch_hook))
        self._handles: list[Any] = []
        self._sampler = _Sampler(self)
        self._sampler_added = False
        self._armed_step = self._stats_step = self._histograms_step = -1  # the step observed now, if any
        self._wake_step = 0  # step_end does nothing before this step's end
        self._resets = self._hooks.step_resets
        self._window_step: int | None = None  # the last sampled step (its end closed the pacers' last window)
        self._window_ns = 0  # the training thread's CPU time then
        self.numerics = self._numerics_observer(raise_on_nonfinite) if check_numerics else None
        self._hooks.add_recorder(self)
        if callable(getattr(writer, "add_flush_callback", None)):  # a flush (an abort's too) has the losses so far
            writer.add_flush_callback(self._hand_over)
        if self.numerics is not None:
            self.numerics.attach()
            self._add_sampler()  # NOTE: the parameters' check runs at every step
        self._arm(self._hooks.current_step())  # the first step is sampled (the pacers' warm-up observes every step)

    # ---- what another framework's models change (instrumentation.torch.watch.TorchWatch) -----------------
    _grad_enabled = staticmethod(engine.is_grad_enabled)

    @staticmethod
    def _activation_stats(layer: str, kind: str, output: Any) -> Any:
        """The ``ActivationStats`` of a layer's output."""
        return activation_stats(layer, kind, output.numpy())

    def _parameters_of(self, model: Any) -> list[tuple[str, Any]]:
        """(name, parameter) pairs; a parameter has ``shape``, ``numpy()`` and ``grad`` (None or with ``numpy()``)."""
        return list(model.named_parameters())

    def _numerics_observer(self, raise_error: bool) -> NumericsObserver:
        return NumericsObserver(self._report, raise_error)

    @property
    def every(self) -> int:
        """The steps between two runs of the statistics now (chosen by the budget unless ``every`` was given)."""
        return self._pace.interval

    # ---- lifetime -------------------------------------------------------------------------------------
    def attach(self, component: Any) -> Any:
        """Close ``component`` (anything with ``close()``) when this handle closes; returns it. A component that
        ``writes_step_times`` (a ``RankMonitor``) takes ``perf/step_time_ms`` and ``perf/data_time_ms`` over."""
        if not callable(getattr(component, "close", None)):
            raise TypeError(f"watch: attach() needs an object with close(), got {type(component).__name__}")
        if getattr(component, "writes_step_times", False):  # a RankMonitor: every step's, on every rank
            self.step_times_elsewhere = True
        self._components.append(component)
        return component

    @property
    def attached(self) -> tuple[Any, ...]:
        """The components attached to this handle (``attach``; ``watch()`` attaches its memory tracker there)."""
        return tuple(self._components)

    def serve_captures(self, capture: Any) -> Any:
        """Attach ``capture`` (an ``OnDemandCapture``, not started) and call its ``check()`` at the end of each
        sampled step (it looks for a request at most every ``check_interval_ms``); returns it."""
        self.attach(capture)
        self._captures.append(capture)
        return capture

    def close(self) -> None:
        """Detach every recorder and forward hook this handle added and close attached components; idempotent."""
        if self.closed:
            return
        self._guard.call("the sample at close", self._sample_at_close)
        self.closed = True
        self._hooks.remove_recorder(self)
        self._hooks.remove_recorder(self._sampler)
        self._sampler_added = False
        self._remove_forward_hooks()
        remove = getattr(self.writer, "remove_flush_callback", None)
        if callable(remove):
            remove(self._hand_over)
        self._hand_over()
        if self.numerics is not None:
            self.numerics.detach()
        for component in reversed(self._components):
            self._guard.call(f"closing {type(component).__name__}", component.close)
        self._components.clear()

    def pause(self) -> None:
        """Stop observing until ``resume()`` (e.g. around an evaluation loop): no recorder, sampler or forward hook
        of this handle is in the engine's paths, and attached components with a ``pause()`` (the memory tracker)
        pause too; ``log_loss`` still logs what it is given. The losses kept so far go to the writer now."""
        if self.paused or self.closed:
            return
        self.paused = True
        self._hooks.remove_recorder(self)
        self._disarm(self._wake_step)
        self._hooks.remove_recorder(self._sampler)  # NOTE: with check_numerics too (_disarm keeps it then)
        self._sampler_added = self._tracking = False
        if self.numerics is not None:
            self.numerics.detach()
        self._call_components("pause")
        self._hand_over()

    def resume(self) -> None:
        """Observe again after ``pause()``: the next step is sampled if its statistics or histograms are due; the
        pacers' next window starts here (the paused steps' time is not counted as observed steps')."""
        if not self.paused or self.closed:
            return
        self.paused = False
        self._call_components("resume")
        self._hooks.add_recorder(self)
        if self.numerics is not None:
            self.numerics.attach()
            self._add_sampler()
        step = self._hooks.current_step()
        self._resets = self._hooks.step_resets
        self._window_step, self._window_ns = step - 1, _thread_ns()
        upcoming = self._next_sample(step - 1)
        if upcoming == step:
            self._arm(step)
        else:
            self._disarm(upcoming - 1)

    def _call_components(self, method: str) -> None:
        """``method()`` of each attached component that has it (``pause``/``resume``), failures reported once."""
        for component in self._components:
            if callable(getattr(component, method, None)):
                self._guard.call(f"{method} of {type(component).__name__}", getattr(component, method))

    def _hand_over(self) -> None:
        """Give the writer the scalars and losses kept so far (at ``close()`` and each writer ``flush()``)."""
        self._guard.call("writing the last scalars", self._scalars.flush)
        self._guard.call("writing the last losses", self._write_losses)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- loss: every step ---------------------------------------------------------------------------------
    def log_loss(self, value: Any, step: int | None = None) -> None:
        """Log the training loss; ``step`` defaults to the step in progress, or the one that just ended. Every loss
        is judged by the spike rule at once (most with one comparison); the writer gets them in batches."""
        began = _now_ns()
        try:
            value = float(value)
            step = self._hooks.step_of_record() if step is None else step if step.__class__ is int else int(step)
            kept = self._kept_losses
            kept.append((value, step, began * 1e-9 + self._wall_offset_s))  # NOTE: the wall time from `began`
            if len(kept) >= LOSS_BATCH:
                self._write_losses()
            rule = self._spike_rule
            if _NEG_INF < value <= rule.quick_limit and len(rule.pending) < rule.lag - 1:
                rule.pending.append(value)  # NOTE: the rule's common case taken here: one call less per step
            else:
                alerts = rule.observe(step, value)
                if alerts:
                    self._on_spike(alerts)
        except PropagatingError:
            raise
        except Exception as error:  # noqa: BLE001 - observing must never break training
            self._guard.failed_at("log_loss", error)
        if recording:
            log_end(LOG_SPAN, began)
        self._fixed_ns += _now_ns() - began

    def _write_losses(self) -> None:
        self._wall_offset_s = _wall() - _now_ns() * 1e-9  # the two clocks drift apart slowly: set again per batch
        kept = self._kept_losses
        if kept:
            self._kept_losses = []
            self._losses.write(*zip(*kept))  # NOTE: the columns as tuples, by zip in C; the writer copies them

    def _on_spike(self, alerts: Any) -> None:
        """Report the rule's alerts and observe the next steps whatever the interval, from the step now."""
        for alert in alerts:
            self._report(alert)
        if not self._pace.fixed and not self.paused:
            now = self._hooks.current_step()
            self._burst_until = max(self._burst_until, now + BURST_STEPS)
            if self._hooks.step_is_open():  # its end arms the steps after it (_next_sample)
                self._wake_step = min(self._wake_step, now)
            elif self._stats_step != now:  # between steps: observe the next one (armed already maybe, for histograms)
                self._arm(now)

    # ---- engine.fit callback ----------------------------------------------------------------------------
    def on_step_end(self, state: Any) -> None:
        if state.loss is not None:  # the optimizer step has closed the step: it is global_step - 1
            self.log_loss(state.loss, max(int(state.global_step) - 1, 0))

    def on_train_begin(self, state: Any) -> None:
        self._epoch_end_step = None  # a new fit: its epochs' lengths count from its own start

    def on_epoch_end(self, state: Any) -> None:
        """Before ``engine.fit``'s last epoch: its last step (if it is as long as this one) is sampled, so the charts
        reach the run's end whatever the interval. Once an epoch, not a step."""
        steps, previous = int(state.step), self._epoch_end_step
        self._epoch_end_step = steps
        length = steps - (previous or 0)
        if int(state.epoch) + 2 != int(state.epochs) or length <= 0 or self.closed or self.paused:
            return
        self._final_step = final = int(state.global_step) + length - 1
        self._sample_soon(final)

    def _sample_soon(self, step: int) -> None:
        """Observe ``step`` (not before the step now): arm it between steps, else wake at the end of the one before."""
        now = self._hooks.current_step()
        if step < now or (step == now and self._hooks.step_is_open()):
            return
        if step == now:
            if self._armed_step != now:
                self._arm(now)
            elif self._stats_step != now:  # armed for its histograms only: its statistics too
                self._arm(now)
        else:
            self._wake_step = min(self._wake_step, step - 1)

    # ---- the step boundary: the one recorder method called at every step -------------------------------------
    def step_end(self, event: hooks.StepEvent) -> None:
        if event.step < self._wake_step and self._hooks.step_resets == self._resets:
            return  # NOTE: the common step: not sampled, not the one before a sampled one
        cpu_ns = _thread_ns()  # NOTE: before the span: a syscall, where a loaded machine's scheduler switches tasks
        began = _now_ns()
        self._guard.call("the step's end", self._at_sample_boundary, event, began, cpu_ns)
        if recording:
            log_end(LOG_SPAN, began)

    def _at_sample_boundary(self, event: hooks.StepEvent, began: int, cpu_ns: int) -> None:
        """The end of a sampled step (its scalars; the pacers' window closes) and/or of the step before one (arm)."""
        step = event.step
        if self._hooks.step_resets != self._resets:  # a new run in this process: its steps count from its own start
            self._resets, self._window_step = self._hooks.step_resets, None
        if step == self._armed_step:
            self._close_window(event, began, cpu_ns)
            began = _now_ns()  # what follows is the next window's cost
            if self._stats_step == step:
                self._step_scalars(event)
            self._scalars.flush()  # the step's scalars, and the pacers' if they decided: one writer item
            for capture in self._captures:
                capture.check()
        upcoming = self._next_sample(step)
        if upcoming == step + 1:
            self._arm(upcoming)
        else:
            self._disarm(upcoming - 1)
        self._run_ns += _now_ns() - began

    def _next_sample(self, step: int) -> int:
        """The first step after ``step`` whose statistics or histograms are due. While a rule's condition holds
        short of its patience, every step is (paced: not with a fixed ``every``): an episode is confirmed or
        ended in ``patience`` steps, not ``patience`` intervals."""
        if not self._pace.fixed and self._rules.streaks.unconfirmed():
            self._burst_until = max(self._burst_until, step + 2)
        if step + 1 < self._burst_until:
            return step + 1
        interval = self._pace.interval
        upcoming = (step // interval + 1) * interval
        histograms = self._histogram_pace
        if histograms is not None:
            interval = histograms.interval
            upcoming = min(upcoming, (step // interval + 1) * interval)
        return self._final_step if step < self._final_step < upcoming else upcoming

    def _arm(self, step: int) -> None:
        """Observe ``step``: the sampler in the engine's recorders, forward hooks on the layers if its statistics are
        due. The step's end is the next boundary ``step_end`` stops at."""
        self._armed_step = self._wake_step = step
        stats = step % self._pace.interval == 0 or step < self._burst_until or step == self._final_step
        histograms = self._histogram_pace is not None and step % self._histogram_pace.interval == 0
        self._stats_step = step if stats else -1
        self._histograms_step = step if histograms else -1
        self._data_wait_ns = 0
        if stats and not self._handles:
            self._handles = [module.register_forward_hook(hook) for module, hook in self._forward_hooks]
        elif not stats:
            self._remove_forward_hooks()
        self._add_sampler()

    def _disarm(self, wake_step: int) -> None:
        """Nothing to observe until ``wake_step``'s end (the step before the next sampled one)."""
        self._armed_step, self._stats_step, self._histograms_step = -1, -1, -1
        self._wake_step = wake_step
        self._remove_forward_hooks()
        if self._sampler_added and self.numerics is None:
            self._hooks.remove_recorder(self._sampler)
            self._sampler_added = False

    def _add_sampler(self) -> None:
        if not self._sampler_added:
            self._hooks.add_recorder(self._sampler)
            self._sampler_added = True

    def _remove_forward_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _close_window(self, event: hooks.StepEvent, began: int, cpu_ns: int) -> None:
        """Give the pacers the costs measured since the last sampled step's end and the time the steps took: the
        training thread's CPU time (a loaded machine's waits for a CPU do not make steps look longer than they are;
        the costs, wall time, are never shorter than their CPU time: the share is never under-estimated)."""
        step, window_step = event.step, self._window_step
        if window_step is None or step <= window_step:
            steps, step_ns = 1, event.duration_ns
        else:
            steps, step_ns = step - window_step, cpu_ns - self._window_ns
        self._window_step, self._window_ns = step, cpu_ns
        stats_ran = self._stats_step == step
        run_ns = self._run_ns + _now_ns() - began
        decided = self._pace.record(step_ns, self._fixed_ns, run_ns, int(stats_ran), steps)
        if decided:
            self._log_pace(self._pace, step)
        histograms = self._histogram_pace
        if histograms is not None:
            if histograms.record(step_ns, 0, self._histogram_ns, int(self._histograms_ran), steps):
                self._log_pace(histograms, step)
            self._histogram_ns, self._histograms_ran = 0, False
        self._fixed_ns = self._run_ns = 0

    def _log_pace(self, pacer: Pacer, step: int) -> None:
        """The figures of the pacer's last window (after it reconsidered its interval), with the step's scalars."""
        self._scalars.extend(*pacer.last.scalars(), step)

    def _step_scalars(self, event: hooks.StepEvent) -> None:
        step_time_ms = event.duration_ns / 1e6
        add = self._scalars.add
        if not self.step_times_elsewhere:
            add(tag_names.STEP_TIME_MS, step_time_ms, event.step)
            add(tag_names.DATA_TIME_MS, self._data_wait_ns / 1e6, event.step)
        if self._batch_size and step_time_ms > 0:
            add(tag_names.SAMPLES_PER_SEC, self._batch_size * 1e3 / step_time_ms, event.step)
        if self._kept_losses and _wall() - self._kept_losses[0][2] > LOSS_LATENCY_S:
            self._write_losses()

    # ---- the sampler's optimizer hook points ---------------------------------------------------------------
    def _optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        step = event.step
        if step != self._armed_step or (self.optimizer is not None and event.optimizer is not self.optimizer):
            return
        began = _now_ns()
        self._stepped_optimizer = event.optimizer  # the learning rate written at close() is its
        self._tracking = self._stats_step == step
        if self._tracking:
            self._guard.call("parameter statistics", self._tracker.begin, step)
            groups = getattr(event.optimizer, "param_groups", None)
            if groups and "lr" in groups[0]:
                lr = float(groups[0]["lr"])
                self._scalars.add(LEARNING_RATE_TAG, lr, step)
                self._rules.observe_learning_rate(lr)
        histogram_ns = 0
        if self._histograms_step == step:
            histogram_ns = _now_ns()
            self._guard.call("histograms", self._histograms, step)
            histogram_ns = _now_ns() - histogram_ns
            self._histograms_ran = True
            self._histogram_ns += histogram_ns
        if recording:
            log_end(LOG_SPAN, began)
        self._run_ns += _now_ns() - began - histogram_ns

    def _histograms(self, step: int) -> None:
        self._last_histogram_step = step
        self._scalars.flush()  # keep the file's order: this step's scalars so far, then the histograms
        for name, param in self._named_parameters:  # NOTE: bucketed here, where the histogram pacer times it
            write_histogram(self.writer, tag_names.WEIGHT + name, param.numpy(), step)
            if param.grad is not None:
                write_histogram(self.writer, tag_names.GRAD + name, param.grad.numpy(), step)

    def _optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        if self.optimizer is not None and event.optimizer is not self.optimizer:
            return
        began = _now_ns()
        stats = None
        if self._tracking:
            self._tracking = False
            stats = self._guard.call("parameter statistics", self._tracker.end)
        spent = _now_ns() - began
        if self.numerics is not None:  # NOTE: a guard the user asked for: not the budget's
            self.numerics.check_parameters(event.optimizer, event.step, self._named_parameters, stats)
        if stats is not None:
            began_writing = _now_ns()
            self._guard.call("parameter scalars", self._parameter_scalars, stats)
            spent += _now_ns() - began_writing
        if recording:
            log_end(LOG_SPAN, began)
        self._run_ns += spent

    def _parameter_scalars(self, stats: Any) -> None:
        tags = self._tags_of_names.get(stats.names)
        if tags is None:
            tags = self._tags_of_names[stats.names] = [tag for name in stats.names for tag in self._norm_tags[name]]
        values = [0.0] * len(tags)
        values[0::2], values[1::2] = stats.grad_norms, stats.update_ratios
        self._scalars.extend(tags, values, stats.step)
        self._last_stats_step = stats.step
        nonfinite_tags, counts = self._nonfinite.scalars(stats)
        if nonfinite_tags:
            self._scalars.extend(nonfinite_tags, counts, stats.step)
        for alert in self._rules.updates(stats.step, stats.names, stats.update_ratios, stats.grad_norms, self._ndims):
            self._report(alert)

    # ---- forward hooks (on the modules only while a step's statistics are due) -----------------------------
    def _layer_output(self, place: str, path: str, kind: str, tags: tuple[str, str, str], module: Any, inputs: tuple,
                      output: Any) -> None:
        if module.training and self._grad_enabled():
            began = _now_ns()
            self._guard.call(place, self._layer_stats, path, kind, tags, output)
            if recording:
                log_end(LOG_SPAN, began)
            self._run_ns += _now_ns() - began

    def _layer_stats(self, path: str, kind: str, tags: tuple[str, str, str], output: Any) -> None:
        step = self._hooks.current_step()
        stats = self._activation_stats(path, kind, output)
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
        if not self._pace.fixed and not self.paused and not self.closed:  # the evidence after it: the next step too
            now = self._hooks.current_step()
            self._burst_until = max(self._burst_until, now + 2)
            self._sample_soon(now + 1 if self._hooks.step_is_open() else now)

    # ---- the sample at close(): what needs no optimizer step -------------------------------------------------
    def _sample_at_close(self) -> None:
        """If steps ended after the last sampled one: the gradient norms the last backward left (``grad_norm/``),
        the learning rate and, with histograms on, the weights' and gradients' histograms, at the last step. The
        update ratios and activations need a step in progress: they end at the last sampled step. Not when closed
        inside a step (an exception): its gradients are not the step's yet."""
        step = self._hooks.current_step() - 1
        if self.paused or self._hooks.step_is_open() or step < 0 or self._hooks.step_resets != self._resets:
            return
        if step > self._last_stats_step:
            self._close_scalars(step)
        if self._histogram_pace is not None and self._last_histogram_step < step:
            self._histograms(step)
        self._scalars.flush()

    def _close_scalars(self, step: int) -> None:
        import numpy as np  # NOTE: once, at close

        tags, values = [], []
        for name, param in self._named_parameters:
            if param.grad is not None:
                grad = np.asarray(param.grad.numpy(), np.float64).reshape(-1)
                tags.append(self._norm_tags[name][0])
                values.append(float(np.sqrt(np.dot(grad, grad))))
        if values and not any(values):  # zeroed in place after the step (zero_grad(set_to_none=False)): not measured
            tags, values = [], []
        optimizer = self.optimizer if self.optimizer is not None else self._stepped_optimizer
        if getattr(optimizer, "param_groups", None):
            group = optimizer.param_groups[0]
            if "lr" in group:
                tags.append(LEARNING_RATE_TAG)
                values.append(float(group["lr"]))
        if tags:
            self._scalars.extend(tags, values, step)
        self._last_stats_step = step
