"""The recording behind profile(): the engine's op log (ops, steps, optimizer steps, input waits) plus added spans."""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from engine import hooks, memory
from engine.op_log import DATA_WAIT, OP_LOG_STRIDE, OPTIMIZER_STEP, STEP_END, OpLog
from instrumentation.format import trace as fmt

# Everything recorded per step is a few ints in a flat list (no per-op object survives, so recording adds no work
# for the cycle collector): an ``engine.op_log.OpLog``. When this recorder holds the engine's one op-log slot the
# engine appends to it directly — ops, and the STEP_END / OPTIMIZER_STEP / DATA_WAIT boundary records — with no
# event and no observer call. Otherwise (another recorder holds the slot, or ``with_stack``) observers append the
# same records to this recorder's own OpLog. Either way the log is decoded once, when the capture is exported:
#   ops:    log.keys[code] = (op, phase, module, input_shapes, input_dtypes) + step, start_ns, end_ns, output_bytes
#   spans:  (category, name, start_ns, end_ns, step)        category: instrumentation.format.trace CAT_*
# Module spans are not hooked (two more events per module call): export derives them from each op's module path.


class Recorder:
    """``start()`` records, ``stop()`` stops, ``clear()`` drops what was recorded (warm-up).

    A step is recorded when it began while recording (its STEP_END record's start is not before ``started_ns``):
    a recorder started mid-step keeps that step's ops but not the step. Ops never nest in the engine (an op's
    forward works on raw arrays), so the observer path keeps one pending start time.
    NOTE: a controller that stops this recorder from its own ``step_end`` calls ``close_step(event)`` first: with
    the op log the engine has already appended the step's end; an observer subscribed after the controller's would
    not be called for that event once removed."""

    def __init__(self, record_shapes: bool = True, profile_memory: bool = True, with_stack: bool = False) -> None:
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.stacks: list[tuple[str, ...]] = []  # with_stack: the caller's frames of each op, aligned with ops
        self.added_spans: list[tuple] = []  # add_span: user and log spans, steps of loops without the engine
        self.log = OpLog(record_shapes)
        self._observer: Any = None
        self._installed = False  # the log is the engine's op log (hooks.set_op_log)
        self.started_ns = self.stopped_ns = 0

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.active:
            return
        self.started_ns = time.perf_counter_ns()
        # NOTE: the engine's op-log slot when free (with_stack needs the caller's frames: an op_start observer)
        if not self.with_stack and hooks.op_log is None:
            self._installed = True
            hooks.set_op_log(self.log)
        else:
            self._observer = hooks.subscribe(_observer_for(self))

    def stop(self) -> None:
        if self._installed and hooks.op_log is self.log:
            hooks.set_op_log(None)
        if self._observer is not None:
            hooks.unsubscribe(self._observer)
        if self.active:
            self.stopped_ns = time.perf_counter_ns()
        self._observer, self._installed = None, False

    @property
    def active(self) -> bool:
        return self._installed or self._observer is not None

    def close_step(self, event: hooks.StepEvent) -> None:
        """Record ``event``'s step end before a controller stops this recorder from inside ``step_end``."""
        if self._observer is not None:
            self._observer.step_end(event)

    def clear(self) -> None:
        # NOTE: in place: the engine or the observer's closures hold these very lists
        self.log.clear()
        del self.stacks[:], self.added_spans[:]
        self.started_ns = time.perf_counter_ns()

    def add_span(self, category: str, name: str, start_ns: int, end_ns: int) -> None:
        self.added_spans.append((category, name, start_ns, end_ns, hooks._step))

    # --- what was recorded, readable (decoded from the log; export time, not per step) ---------------------------
    @property
    def op_count(self) -> int:
        return sum(1 for code in self.log.data[::OP_LOG_STRIDE] if code >= 0)

    @property
    def ops(self) -> list[tuple]:
        """(op, phase, module, step, start_ns, end_ns, input_shapes, input_dtypes, output_bytes) per op."""
        keys, data = self.log.keys, self.log.data
        return [keys[data[i]][:3] + (data[i + 1], data[i + 2], data[i + 3]) + keys[data[i]][3:] + (data[i + 4],)
                for i in range(0, len(data), OP_LOG_STRIDE) if data[i] >= 0]

    @property
    def memory(self) -> list[tuple[int, str, int]]:
        """(time_ns, device, allocated_bytes) at the end of each op (profile_memory; [] without)."""
        if not self.profile_memory:
            return []
        data = self.log.data
        return [(end_ns, "cpu", allocated) for code, end_ns, allocated in
                zip(data[::OP_LOG_STRIDE], data[3::OP_LOG_STRIDE], data[5::OP_LOG_STRIDE]) if code >= 0]

    @property
    def spans(self) -> list[tuple]:
        """(category, name, start_ns, end_ns, step): the log's steps, optimizer steps and input waits, and the added
        spans, by start time."""
        data, names, started_ns = self.log.data, self.log.names, self.started_ns
        spans = list(self.added_spans)
        for i in range(0, len(data), OP_LOG_STRIDE):
            code = data[i]
            if code >= 0:
                continue
            step, start_ns, end_ns = data[i + 1], data[i + 2], data[i + 3]
            if code == STEP_END:
                if start_ns >= started_ns:
                    spans.append((fmt.CAT_STEP, f"step {step}", start_ns, end_ns, step))
            elif code == OPTIMIZER_STEP:
                spans.append((fmt.CAT_OPTIMIZER, names[data[i + 4]], start_ns, end_ns, step))
            elif code == DATA_WAIT:
                spans.append((fmt.CAT_DATA, "data", start_ns, end_ns, step))
        spans.sort(key=lambda span: span[2])
        return spans


def _observer_for(recorder: Recorder) -> Any:
    """An observer appending to ``recorder.log`` what the engine appends itself to an installed op log."""
    observer = type("ProfilerObserver", (), {})()
    log = recorder.log
    extend, codes, intern, cpu = log.data.extend, {}, log.intern, memory._state("cpu")
    with_stack, stacks, shapes = recorder.with_stack, recorder.stacks, recorder.record_shapes
    start_ns = [0]
    optimizer_start_ns: list[int | None] = [None]

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

    def step_end(event: hooks.StepEvent) -> None:
        extend((STEP_END, event.step, event.time_ns - event.duration_ns, event.time_ns, 0, 0))

    def data_wait(event: hooks.DataWaitEvent) -> None:
        extend((DATA_WAIT, event.step, event.time_ns - event.wait_ns, event.time_ns, 0, 0))

    def optimizer_step_begin(event: hooks.OptimizerEvent) -> None:
        optimizer_start_ns[0] = event.time_ns

    def optimizer_step_end(event: hooks.OptimizerEvent) -> None:
        start, optimizer_start_ns[0] = optimizer_start_ns[0], None
        if start is not None:
            extend((OPTIMIZER_STEP, event.step, start, event.time_ns, log.optimizer_code(type(event.optimizer)), 0))

    for method in (op_start, op_end, step_end, data_wait, optimizer_step_begin, optimizer_step_end):
        setattr(observer, method.__name__, method)
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
