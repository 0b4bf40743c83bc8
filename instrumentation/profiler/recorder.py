"""The engine-hooks observer behind profile(): appends op, step, data, optimizer and memory records."""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from engine import hooks, memory

# What is kept per op is a few ints in flat lists (no per-op object survives, so recording adds no work for the
# cycle collector); names, shapes and dtypes are interned once per distinct (op, phase, module, shapes, dtypes).
#   op key:   (op, phase, module, input_shapes, input_dtypes)              -> its index in _op_keys
#   op data:  OP_STRIDE ints per op: key index, step, start_ns, end_ns, output_bytes
#   memory:   profile_memory: the engine's allocated bytes (cpu) after each op, aligned with the ops
#   spans:    (category, name, start_ns, end_ns, step)        category: instrumentation.format.trace CAT_*
# ``ops`` and ``memory`` rebuild the readable tuples for export. Module spans are not hooked (two more events per
# module call): export derives them from each op's module path.
OP_STRIDE = 5


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
        self._op_keys: list[tuple] = []
        self._op_codes: dict[tuple, int] = {}
        self._op_data: list[int] = []
        self._memory_data: list[int] = []
        self._step_start_ns: int | None = None
        self._optimizer_start_ns = 0
        self._observer: Any = None
        self.started_ns = self.stopped_ns = 0

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._observer is not None:
            return
        self._observer = _observer_for(self)
        self.started_ns = time.perf_counter_ns()
        hooks.subscribe(self._observer)

    def stop(self) -> None:
        if self._observer is None:
            return
        hooks.unsubscribe(self._observer)
        self._observer = None
        self.stopped_ns = time.perf_counter_ns()

    @property
    def active(self) -> bool:
        return self._observer is not None

    def clear(self) -> None:
        # NOTE: in place: the observer's closures hold these very lists
        del self._op_data[:], self._memory_data[:], self.stacks[:], self.spans[:]
        self.steps_seen = 0
        self._step_start_ns = None
        self.started_ns = time.perf_counter_ns()

    def add_span(self, category: str, name: str, start_ns: int, end_ns: int) -> None:
        self.spans.append((category, name, start_ns, end_ns, hooks._step))

    # --- what was recorded, readable ------------------------------------------------------------------------
    @property
    def op_count(self) -> int:
        return len(self._op_data) // OP_STRIDE

    @property
    def ops(self) -> list[tuple]:
        """(op, phase, module, step, start_ns, end_ns, input_shapes, input_dtypes, output_bytes) per op."""
        keys, data = self._op_keys, self._op_data
        return [keys[data[i]][:3] + (data[i + 1], data[i + 2], data[i + 3]) + keys[data[i]][3:] + (data[i + 4],)
                for i in range(0, len(data), OP_STRIDE)]

    @property
    def memory(self) -> list[tuple[int, str, int]]:
        """(time_ns, device, allocated_bytes) sampled at the end of each op (profile_memory)."""
        data = self._memory_data
        return [(data_end, "cpu", allocated) for data_end, allocated in zip(self._op_data[3::OP_STRIDE], data)]

    def op_code(self, key: tuple) -> int:
        """The index of an op key (see the layout above), interning it on first sight."""
        code = self._op_codes.get(key)
        if code is None:
            code = self._op_codes[key] = len(self._op_keys)
            self._op_keys.append(key)
        return code

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


def _observer_for(recorder: Recorder) -> Any:
    """An object exposing only the hook methods wanted. ``op_start``/``op_end`` are closures over the recorder's
    lists (a few list operations per op: no attribute lookups, no object kept per op)."""
    observer = type("ProfilerObserver", (), {})()
    for name in _HOOKS:
        setattr(observer, name, getattr(recorder, name))
    start_ns = [0]
    extend, codes, intern = recorder._op_data.extend, recorder._op_codes, recorder.op_code
    sample, allocated = recorder._memory_data.append, memory.allocated_bytes
    with_stack, stacks, shapes, memory_on = recorder.with_stack, recorder.stacks, recorder.record_shapes, recorder.profile_memory

    def op_start(event: hooks.OpEvent) -> None:
        start_ns[0] = event.time_ns
        if with_stack:
            stacks.append(_user_frames())

    def op_end(event: hooks.OpEvent) -> None:
        key = ((event.op, event.phase, event.module, event.input_shapes, event.input_dtypes) if shapes
               else (event.op, event.phase, event.module, (), ()))
        code = codes.get(key)
        extend((intern(key) if code is None else code, event.step, start_ns[0], event.time_ns, event.output_bytes))
        if memory_on:
            sample(allocated("cpu"))

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
