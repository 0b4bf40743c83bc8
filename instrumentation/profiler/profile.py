"""``profile()``: a context manager that records scheduled steps and writes one Chrome trace per cycle."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

from engine import hooks
from instrumentation.distributed.context import flush_at_abort
from instrumentation.format import trace as fmt
from instrumentation.profiler.aggregate import KeyAverages, key_averages
from instrumentation.profiler.export import build_trace, write_capture
from instrumentation.profiler.input_bound import InputBoundDetector
from instrumentation.profiler.ondemand import OnDemandCapture
from instrumentation.profiler.recorder import Recorder
from instrumentation.profiler.schedule import ProfilerAction, Schedule, always_record
from instrumentation.profiler.spans import add_sink, remove_sink

_RECORDING = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """``with profile(run_dir, schedule=schedule(wait=1, warmup=1, active=3)) as prof: ...; prof.step()``.

    Steps advance by themselves at each engine step end (``optimizer.step()``); loops without the engine call
    ``prof.step()`` once per step (a call right after an engine step end is ignored, so calling it in an engine
    loop too is harmless). Without a schedule every step is recorded until the block ends. Each finished
    cycle is written under ``<logdir>/plugins/profile/<capture_id>/`` (when ``logdir`` is given) and passed to
    ``on_trace_ready(prof)``. ``on_demand=True`` records nothing by itself: it answers the board's capture
    requests (see ``OnDemandCapture``). With a ``logdir``, the ``input_bound`` diagnosis runs meanwhile."""

    def __init__(self, logdir: str | os.PathLike[str] | None = None, *, schedule: Schedule | Callable | None = None,
                 record_shapes: bool = True, with_stack: bool = False, profile_memory: bool = True,
                 on_trace_ready: Callable[[profile], Any] | None = None, on_demand: bool = False,
                 input_bound: bool = True) -> None:
        if on_demand and logdir is None:
            raise ValueError("profile(on_demand=True) needs the run directory (logdir) the board writes requests into")
        self.logdir = None if logdir is None else os.fspath(logdir)
        self.schedule = schedule if schedule is not None else always_record
        self.record_shapes, self.with_stack, self.profile_memory = record_shapes, with_stack, profile_memory
        self.on_trace_ready, self.on_demand = on_trace_ready, on_demand
        self.step_num = 0
        self.last_trace: dict[str, Any] | None = None
        self.last_trace_path: str | None = None
        self.traces_written: list[str] = []
        self._action = ProfilerAction.NONE
        self._recorder: Recorder | None = None
        self._on_demand: OnDemandCapture | None = None
        self._input_bound = InputBoundDetector(self.logdir) if (input_bound and self.logdir is not None) else None
        self._engine_step = 0  # hooks' step counter when prof.step() last looked (see step())
        self._quiet_until = 0  # the next step number at which the schedule may start or end something
        self._subscribed = False
        self._step_start_ns = 0

    # --- context manager ------------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._subscribed:
            return
        if self.on_demand:
            self._on_demand = OnDemandCapture(self.logdir, record_shapes=self.record_shapes,
                                              profile_memory=self.profile_memory, on_capture=self._captured)
            self._on_demand.start()
        elif self.schedule is not always_record:
            hooks.add_recorder(self)
        self._subscribed = True
        self._engine_step = hooks._step
        if self._input_bound is not None:
            self._input_bound.start()
        self._step_start_ns = time.perf_counter_ns()
        if not self.on_demand:
            self._enter(self.schedule(self.step_num))
            flush_at_abort(self.save_at_abort)

    def save_at_abort(self) -> None:
        """Write what the cycle in progress recorded (a data-parallel job being aborted: ``engine.distributed``
        calls this when ``start()`` registered it); nothing when not recording."""
        if self._subscribed and self._recorder is not None:
            self._save()

    def stop(self) -> None:
        if not self._subscribed:
            return
        self._subscribed = False
        if self._on_demand is not None:
            self._on_demand.close()
        else:
            hooks.remove_recorder(self)  # (a no-op without a schedule: nothing was added)
            if self._recorder is not None:
                try:
                    self._save()
                except Exception as error:  # noqa: BLE001 - profiling must never break training
                    print(f"flowscope: writing the profile failed ({type(error).__name__}: {error})", file=sys.stderr)
        if self._input_bound is not None:
            self._input_bound.stop()

    # --- steps ------------------------------------------------------------------------------------------------
    def step_end(self, event: hooks.StepEvent) -> None:
        """The engine's step end (subscribed only with a schedule). Most steps of a cycle have nothing to do."""
        self.step_num += 1
        if self.step_num >= self._quiet_until:
            self._transition(event)

    def step(self) -> None:
        """Mark a step boundary (only needed without the engine; see the class docstring)."""
        if hooks._step != self._engine_step:  # the engine ended a step since the last call: it already advanced
            self._engine_step = hooks._step
            return
        if self._on_demand is not None:
            self._on_demand.poll()
            return
        now = time.perf_counter_ns()
        if self._recorder is not None:
            self._recorder.add_span(fmt.CAT_STEP, f"step {self.step_num}", self._step_start_ns, now)
        self._step_start_ns = now
        self.step_num += 1
        if self.step_num >= self._quiet_until:
            self._transition(None)

    def _transition(self, event: hooks.StepEvent | None) -> None:
        """Step ``step_num`` begins: end the cycle, drop the warm-up or start recording as the schedule says."""
        try:
            previous, current = self._action, self.schedule(self.step_num)
            recorder = self._recorder
            if recorder is not None:
                if previous is ProfilerAction.RECORD_AND_SAVE or current is ProfilerAction.NONE:
                    self._save()
                elif previous is ProfilerAction.WARMUP and current is not ProfilerAction.WARMUP:
                    recorder.clear()
            self._enter(current)
        except Exception as error:  # noqa: BLE001 - profiling must never break training
            self._quiet_until = self.step_num + 1
            print(f"flowscope: profiler step {self.step_num} failed ({type(error).__name__}: {error})",
                  file=sys.stderr)

    def _enter(self, action: ProfilerAction) -> None:
        self._action = action
        self._quiet_until = self._next_transition(self.step_num)
        if action in _RECORDING and self._recorder is None:
            self._recorder = Recorder(self.record_shapes, self.profile_memory, self.with_stack)
            if self._recorder.timer is not None and self._input_bound is not None:  # GPU idle for input_bound
                self._recorder.timer.listeners.append(self._input_bound.gpu_step)
            self._recorder.start()
            add_sink(self._recorder)

    def _next_transition(self, step_num: int) -> int:
        """The first step number after ``step_num`` at which the schedule may change what happens."""
        if self.schedule is always_record:
            return sys.maxsize
        if isinstance(self.schedule, Schedule):
            change = self.schedule.next_change(step_num)
            return sys.maxsize if change is None else change
        return step_num + 1  # any other callable: asked every step

    def _save(self) -> None:
        recorder, self._recorder = self._recorder, None
        recorder.stop()
        remove_sink(recorder)
        if not recorder.log.data and not recorder.added_spans and not recorder.comm:
            return
        trace = build_trace(recorder, self.schedule.as_dict() if isinstance(self.schedule, Schedule) else None)
        path = write_capture(self.logdir, trace) if self.logdir is not None else None
        self._captured(path, trace)

    def _captured(self, path: str | None, trace: dict[str, Any]) -> None:
        self.last_trace, self.last_trace_path = trace, path
        if path is not None:
            self.traces_written.append(path)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # --- results ------------------------------------------------------------------------------------------------
    def key_averages(self, group_by: str = "op") -> KeyAverages:
        """Op statistics of the last finished cycle (grouped by ``op``, ``module`` or ``shape``)."""
        if self.last_trace is None:
            raise RuntimeError("profile.key_averages(): nothing recorded yet (no cycle has finished)")
        return key_averages(self.last_trace, group_by)

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        if self.last_trace is None:
            raise RuntimeError("profile.export_chrome_trace(): nothing recorded yet (no cycle has finished)")
        fmt.write_trace(path, self.last_trace)
