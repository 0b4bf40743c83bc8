"""The engine-hooks observer behind profile(): appends op, step, data, optimizer and memory records."""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from engine import hooks, memory
from engine.op_log import OP_LOG_STRIDE, OpLog

# What is kept per op is a few ints in a flat list (no per-op object survives, so recording adds no work for the
# cycle collector): an ``engine.op_log.OpLog``. The engine appends to it directly (no event, no observer call) when
# this recorder holds the engine's one op-log slot; otherwise (another recorder holds it, or ``with_stack``) the
# recorder's op_start/op_end observers append the same records to their own OpLog.
#   op data:  OP_LOG_STRIDE ints per op: key code, step, start_ns, end_ns, output_bytes, allocated bytes (cpu) after
#   op keys:  log.keys[code] = (op, phase, module, input_shapes, input_dtypes)
#   spans:    (category, name, start_ns, end_ns, step)        category: instrumentation.format.trace CAT_*
# ``ops`` and ``memory`` rebuild the readable tuples for export. Module spans are not hooked (two more events per
# module call): export derives them from each op's module path.


class Recorder:
    """Subscribe with ``start()``, stop with ``stop()``; ``clear()`` drops what was recorded (warm-up).

    Ops never nest in the engine (an op's forward works on raw arrays), so one pending start time suffices.
    NOTE: the engine iterates a hook list while calling it. A controller that starts or stops a recorder from
    its own ``step_end`` was subscribed first, so the recorder's entry comes later in each list: appending it
    or removing it there never skips another observer. To stop at a step end, the controller first passes
    the event on (``recorder.step_end(event)``), because the removed recorder is not called for it."""

    def __init__(self, record_shapes: bool = True, profile_memory: bool = True, with_stack: bool = False) -> None:
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.stacks: list[tuple[str, ...]] = []  # with_stack: the caller's frames of each op, aligned with ops
        self.spans: list[tuple] = []
        self.steps_seen = 0  # step_end events while recording
        self.log = OpLog(record_shapes)
        self._step_start_ns: int | None = None
        self._optimizer_start_ns = 0
        self._observer: Any = None
        self._installed = False  # the log is the engine's op log (hooks.set_op_log)
        self.started_ns = self.stopped_ns = 0

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._observer is not None:
            return
        # NOTE: the engine's op-log slot when free (with_stack needs the caller's frames: an op_start observer)
        self._installed = not self.with_stack and hooks.op_log is None
        self._observer = _observer_for(self, with_op_hooks=not self._installed)
        self.started_ns = time.perf_counter_ns()
        hooks.subscribe(self._observer)
        if self._installed:
            hooks.set_op_log(self.log)

    def stop(self) -> None:
        if self._observer is None:
            return
        if self._installed and hooks.op_log is self.log:
            hooks.set_op_log(None)
        hooks.unsubscribe(self._observer)
        self._observer = None
        self._installed = False
        self.stopped_ns = time.perf_counter_ns()

    @property
    def active(self) -> bool:
        return self._observer is not None

    def clear(self) -> None:
        # NOTE: in place: the engine or the observer's closures hold these very lists
        self.log.clear()
        del self.stacks[:], self.spans[:]
        self.steps_seen = 0
        self._step_start_ns = None
        self.started_ns = time.perf_counter_ns()

    def add_span(self, category: str, name: str, start_ns: int, end_ns: int) -> None:
        self.spans.append((category, name, start_ns, end_ns, hooks._step))

    # --- what was recorded, readable ------------------------------------------------------------------------
    @property
    def op_count(self) -> int:
        return len(self.log.data) // OP_LOG_STRIDE

    @property
    def ops(self) -> list[tuple]:
        """(op, phase, module, step, start_ns, end_ns, input_shapes, input_dtypes, output_bytes) per op."""
        keys, data = self.log.keys, self.log.data
        return [keys[data[i]][:3] + (data[i + 1], data[i + 2], data[i + 3]) + keys[data[i]][3:] + (data[i + 4],)
                for i in range(0, len(data), OP_LOG_STRIDE)]

    @property
    def memory(self) -> list[tuple[int, str, int]]:
        """(time_ns, device, allocated_bytes) at the end of each op (profile_memory; [] without)."""
        if not self.profile_memory:
            return []
        data = self.log.data
        return [(end_ns, "cpu", allocated) for end_ns, allocated in zip(data[3::OP_LOG_STRIDE], data[5::OP_LOG_STRIDE])]

    # --- hook methods (op_start/op_end are closures built by _observer_for) ---------------------------------------
    def step_begin(self, event: hooks.StepEvent) -> None:
        self._step_start_ns = event.time_ns

    def step_end(self, event: hooks.StepEvent) -> None:
        """Records the step when its begin was recorded too (a recorder started mid-step ignores that step)."""
        start = self._step_start_ns
        if start is None:
            return
        self.spans.append(("step", f"step {event.step}", start, event.time_ns, event.step))
        self._step_start_ns = None
        self.steps_seen += 1

    @property
    def step_open(self) -> bool:
        """A step began while recording and has not ended yet."""
        return self._step_start_ns is not None

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self.spans.append(("data", "data", event.time_ns - event.wait_ns, event.time_ns, event.step))

    def optimizer_step_begin(self, event: hooks.OptimizerEvent) -> None:
        self._optimizer_start_ns = event.time_ns

    def optimizer_step_end(self, event: hooks.OptimizerEvent) -> None:
        self.spans.append(("optimizer", type(event.optimizer).__name__ + ".step", self._optimizer_start_ns,
                           event.time_ns, event.step))


_HOOKS = ("step_begin", "step_end", "data_wait", "optimizer_step_begin", "optimizer_step_end")


def _observer_for(recorder: Recorder, with_op_hooks: bool) -> Any:
    """An object exposing only the hook methods wanted. With ``with_op_hooks``, ``op_start``/``op_end`` are closures
    appending to the recorder's log what the engine would append itself (a few list operations per op)."""
    observer = type("ProfilerObserver", (), {})()
    for name in _HOOKS:
        setattr(observer, name, getattr(recorder, name))
    if not with_op_hooks:
        return observer
    start_ns = [0]
    log = recorder.log
    extend, codes, intern, cpu = log.data.extend, {}, log.intern, memory._state("cpu")
    with_stack, stacks, shapes = recorder.with_stack, recorder.stacks, recorder.record_shapes

    def op_start(event: hooks.OpEvent) -> None:
        start_ns[0] = event.time_ns
        if with_stack:
            stacks.append(_user_frames())

    def op_end(event: hooks.OpEvent) -> None:
        key = ((event.op, event.phase, event.module, event.input_shapes, event.input_dtypes) if shapes
               else (event.op, event.phase, event.module, (), ()))
        code = codes.get(key)
        if code is None:
            code = codes[key] = intern(key)
        extend((code, event.step, start_ns[0], event.time_ns, event.output_bytes, cpu.allocated))

    observer.op_end = op_end
    observer.op_start = op_start
    return observer


_OWN_DIRS = (os.path.dirname(os.path.abspath(hooks.__file__)) + os.sep,  # engine/
             os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)  # instrumentation/
STACK_DEPTH = 6


def _user_frames() -> tuple[str, ...]:
    """``file:line function`` of the innermost frames outside the engine and the instrumentation."""
    frames: list[str] = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < STACK_DEPTH:
        filename = frame.f_code.co_filename
        if not filename.startswith(_OWN_DIRS):
            frames.append(f"{filename}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return tuple(frames)
