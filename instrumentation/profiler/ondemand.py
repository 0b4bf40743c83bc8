"""On-demand capture: at step boundaries, at most every ``check_interval_ms``, look for the board's request file."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

from engine import hooks
from instrumentation.format import trace as fmt
from instrumentation.format.capture_listener import listener_path, write_listener
from instrumentation.profiler.export import build_trace, write_capture
from instrumentation.profiler.recorder import Recorder
from instrumentation.profiler.spans import add_sink, remove_sink

DEFAULT_CHECK_INTERVAL_MS = 1000.0
_listening: dict[str, int] = {}  # run directory -> OnDemandCaptures of this process started on it
_listening_lock = threading.Lock()


class OnDemandCapture:
    """Answers capture requests for ``run_dir`` (see ``instrumentation.format.trace``): no port, no thread while idle.

    ``start()`` subscribes to the engine's ``step_end``; loops without the engine call ``poll()`` once per
    step instead. Idle cost per step: one clock read and a comparison; a ``stat`` at most every
    ``check_interval_ms``. A host that visits step boundaries of its own choosing (``watch()``: the steps it
    samples) calls ``check()`` there instead of ``start()``: nothing at the other steps, and a claimed request
    subscribes the capture to ``step_end`` until its steps are recorded. A request is claimed by renaming it
    (``capture_request.running.json``), the next
    ``steps`` steps are recorded, the trace is written from a background thread and the outcome file
    (``capture_request.done.json``) names the capture id. While started, the run's ``capture_listener.json`` names
    this process (its modification time, refreshed at each check, is the heartbeat), so that the board can tell a
    finished run from a live one before it asks."""

    def __init__(self, run_dir: str | os.PathLike[str], check_interval_ms: float = DEFAULT_CHECK_INTERVAL_MS,
                 record_shapes: bool = True, profile_memory: bool = True,
                 on_capture: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.run_dir = os.fspath(run_dir)
        self.check_interval_ns = int(check_interval_ms * 1e6)
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.on_capture = on_capture  # called with (trace path, trace) after each capture is written
        self.captures: list[str] = []  # trace paths written so far
        self.last_trace: dict[str, Any] | None = None
        self._request_path = fmt.request_path(self.run_dir)
        self._listener_path = listener_path(self.run_dir)
        self._next_check_ns = 0
        self._recorder: Recorder | None = None
        self._steps_recorded = 0  # step boundaries since the capture started
        self._request: fmt.CaptureRequest | None = None
        self._writers: list[threading.Thread] = []
        self._subscribed = False
        self._listened = False  # this object counts among the run's listeners (start(), or the first check())
        self._subscribed_for_capture = False  # by check(): taken out again when the capture is written
        self._reported = False
        self._step_start_ns = time.perf_counter_ns()

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> OnDemandCapture:
        if not self._subscribed:
            hooks.add_recorder(self)
            self._subscribed = True
        self._listen_once()
        return self

    def _listen_once(self) -> None:
        if not self._listened:
            self._listened = True
            self._listen(+1)

    def _listen(self, change: int) -> None:
        """Count this process's listeners on the run; the first writes the listener file, the last removes it."""
        with _listening_lock:
            key = os.path.abspath(self.run_dir)
            count = _listening[key] = _listening.get(key, 0) + change
            if count <= 0:
                _listening.pop(key, None)
            try:
                if change > 0 and count == 1:
                    write_listener(self.run_dir)
                elif count <= 0:
                    os.remove(listener_path(self.run_dir))
            except FileNotFoundError:
                pass
            except Exception as error:  # noqa: BLE001 - a capture must never break training
                self._report(f"cannot {'write' if change > 0 else 'remove'} the listener file ({type(error).__name__}:"
                             f" {error})")

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop watching; a capture in progress is written with the steps it has; waits for pending writes."""
        if self._subscribed:
            hooks.remove_recorder(self)
            self._subscribed = False
        if self._listened:  # a host's check() listened without subscribing (watch(..., capture_requests=True))
            self._listened = False
            self._listen(-1)
        if self._recorder is not None:
            self._finish()
        for writer in self._writers:
            writer.join(timeout_s)
        self._writers.clear()

    @property
    def capturing(self) -> bool:
        return self._recorder is not None

    # --- the step boundary ------------------------------------------------------------------------------------
    def step_end(self, event: hooks.StepEvent) -> None:
        self._boundary(event)

    def check(self) -> None:
        """At a step boundary a host chose (not subscribed): look for a request if ``check_interval_ms`` has passed;
        a claimed one records the steps from here on through ``step_end``."""
        if self._recorder is not None or self._subscribed:
            return
        self._listen_once()
        self._boundary(None)
        if self._recorder is not None:
            hooks.add_recorder(self)
            self._subscribed = self._subscribed_for_capture = True

    def poll(self) -> None:
        """Call once per step from a loop that does not use the engine's optimizers."""
        self._boundary(None)

    def _boundary(self, event: hooks.StepEvent | None) -> None:
        recorder = self._recorder
        if recorder is not None:
            # NOTE: a capture starts at a step boundary, so every boundary after it ends a recorded step
            if event is None:
                now = time.perf_counter_ns()
                recorder.add_span(fmt.CAT_STEP, f"step {self._steps_recorded}", self._step_start_ns, now)
                self._step_start_ns = now
            self._steps_recorded += 1
            if self._steps_recorded >= self._request.steps:
                self._finish()
            return
        now = time.perf_counter_ns()
        self._step_start_ns = now
        if now < self._next_check_ns:
            return
        self._next_check_ns = now + self.check_interval_ns
        try:
            self._heartbeat()
        except Exception as error:  # noqa: BLE001 - a capture must never break training
            self._report(f"cannot refresh the listener file ({type(error).__name__}: {error})")
        try:
            self._check()
        except Exception as error:  # noqa: BLE001 - a capture must never break training
            self._report(f"capture request check failed ({type(error).__name__}: {error})")

    def _heartbeat(self) -> None:
        try:
            os.utime(self._listener_path)
        except FileNotFoundError:  # removed under us (by hand, or by a process that wrote this run before)
            write_listener(self.run_dir)

    def _check(self) -> None:
        if not os.path.exists(self._request_path):
            return
        running = fmt.request_path(self.run_dir, fmt.CAPTURE_RUNNING_NAME)
        try:
            os.replace(self._request_path, running)  # the claim: atomic, so one process takes a request
        except FileNotFoundError:
            return
        with open(running, encoding="utf-8") as handle:
            text = handle.read()
        try:
            request = fmt.CaptureRequest.from_json(text)
        except (ValueError, TypeError) as error:
            fmt.write_capture_outcome(self.run_dir, fmt.CaptureRequest("", 0, 0.0), "", f"invalid request: {error}")
            os.remove(running)
            return
        self._request, self._steps_recorded = request, 0
        self._recorder = Recorder(self.record_shapes, self.profile_memory)
        self._recorder.start()
        add_sink(self._recorder)
        self._step_start_ns = time.perf_counter_ns()

    def _finish(self) -> None:
        recorder, request = self._recorder, self._request
        self._recorder = self._request = None
        if self._subscribed_for_capture:
            hooks.remove_recorder(self)
            self._subscribed = self._subscribed_for_capture = False
        recorder.stop()
        remove_sink(recorder)
        writer = threading.Thread(target=self._write, args=(recorder, request), name="flowscope-capture-writer")
        writer.start()
        self._writers = [w for w in self._writers if w.is_alive()] + [writer]

    def _write(self, recorder: Recorder, request: fmt.CaptureRequest) -> None:
        running = fmt.request_path(self.run_dir, fmt.CAPTURE_RUNNING_NAME)
        try:
            trace = build_trace(recorder, {"on_demand_steps": request.steps})
            path = write_capture(self.run_dir, trace)
            self.captures.append(path)
            self.last_trace = trace
            fmt.write_capture_outcome(self.run_dir, request, os.path.basename(os.path.dirname(path)))
            if self.on_capture is not None:
                self.on_capture(path, trace)
        except Exception as error:  # noqa: BLE001
            self._report(f"writing the capture failed ({type(error).__name__}: {error})")
            try:
                fmt.write_capture_outcome(self.run_dir, request, "", f"{type(error).__name__}: {error}")
            except OSError:
                pass
        finally:
            try:
                os.remove(running)
            except OSError:
                pass

    def _report(self, message: str) -> None:
        if not self._reported:
            self._reported = True
            print(f"flowscope: on-demand profiling of {self.run_dir}: {message}; further failures are not reported",
                  file=sys.stderr)
