"""The engine-hooks observer behind profile(): appends op, step, data, optimizer and memory records."""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from engine import hooks, memory

# Record layouts (plain tuples appended to lists: the cheapest thing per op that CPython offers).
#   ops:      (op, phase, module, step, start_ns, end_ns, input_shapes, input_dtypes, output_bytes)
#   spans:    (category, name, start_ns, end_ns, step)        category: instrumentation.format.trace CAT_*
#   memory:   (time_ns, device, allocated_bytes)               sampled after each op
# Module spans are not hooked (two more events per module call): export derives them from each op's module path.


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
        self.ops: list[tuple] = []
        self.spans: list[tuple] = []
        self.memory: list[tuple] = []
        self.steps_seen = 0  # step_end events while recording
        self._op_start_ns = 0
        self._step_start_ns: int | None = None
        self._optimizer_start_ns = 0
        self._memory_stats = memory.stats
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
        self.ops, self.spans, self.memory, self.stacks = [], [], [], []
        self.steps_seen = 0
        self._step_start_ns = None
        self.started_ns = time.perf_counter_ns()

    def add_span(self, category: str, name: str, start_ns: int, end_ns: int) -> None:
        self.spans.append((category, name, start_ns, end_ns, hooks._step))

    # --- hook methods (bound into a small observer object; see _observer_for) -------------------------------
    def op_start(self, event: hooks.OpEvent) -> None:
        self._op_start_ns = event.time_ns

    def op_end(self, event: hooks.OpEvent) -> None:
        if self.record_shapes:
            self.ops.append((event.op, event.phase, event.module, event.step, self._op_start_ns, event.time_ns,
                             event.input_shapes, event.input_dtypes, event.output_bytes))
        else:
            self.ops.append((event.op, event.phase, event.module, event.step, self._op_start_ns, event.time_ns,
                             (), (), event.output_bytes))

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

    def op_start_with_stack(self, event: hooks.OpEvent) -> None:
        self._op_start_ns = event.time_ns
        self.stacks.append(_user_frames())

    def op_end_with_memory(self, event: hooks.OpEvent) -> None:
        self.op_end(event)
        self.memory.append((event.time_ns, "cpu", self._memory_stats("cpu").allocated_bytes))


_HOOKS = ("op_start", "op_end", "step_begin", "step_end", "data_wait", "optimizer_step_begin", "optimizer_step_end")


def _observer_for(recorder: Recorder) -> Any:
    """An object exposing only the hook methods wanted; with ``profile_memory`` op_end also samples the allocator."""
    observer = type("ProfilerObserver", (), {})()
    for name in _HOOKS:
        setattr(observer, name, getattr(recorder, name))
    if recorder.profile_memory:
        observer.op_end = recorder.op_end_with_memory
    if recorder.with_stack:
        observer.op_start = recorder.op_start_with_stack
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
