"""The recording behind profile(): the engine's op log (ops, steps, optimizer steps, input waits) plus added spans."""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from engine import hooks
from engine.op_log import DATA_WAIT, OPTIMIZER_STEP, STEP_END, BoundaryRecord, OpLog, OpRecord
from instrumentation.distributed.context import initialized
from instrumentation.format import trace as fmt
from instrumentation.profiler.gpu_lane import device_timer

# Everything recorded per step is an ``engine.op_log.OpLog`` (a few ints per op in a flat list: no per-op object
# survives, so recording adds no work for the cycle collector), added to the engine's recorders while recording — ops,
# and the step, optimizer-step and data-wait boundary records, with no event object. ``with_stack`` adds a second
# recorder whose ``op_begin`` keeps the caller's frames. The log is decoded once, by name, when the capture is
# exported (``OpLog.records()``): ``ops`` are its ``OpRecord``s, ``spans`` its boundaries as
# (category, name, start_ns, end_ns, step) with ``category`` an ``instrumentation.format.trace`` CAT_*, plus the
# added spans. Module spans are not hooked (two more events per module call): export derives them from each op's
# module path.


class Recorder:
    """``start()`` records, ``stop()`` stops, ``clear()`` drops what was recorded (warm-up).

    A step is recorded when it began while recording (its STEP_END record's start is not before ``started_ns``):
    a recorder started mid-step keeps that step's ops but not the step. The log's ``recorder_order`` (-1) puts its
    ``step_end`` before a controller's (order 0), so a controller may stop this recorder from its own ``step_end``:
    the step's end is already recorded."""

    def __init__(self, record_shapes: bool = True, profile_memory: bool = True, with_stack: bool = False,
                 kernel_timer: Any = None) -> None:
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.stacks: list[tuple[str, ...]] = []  # with_stack: the caller's frames of each op, aligned with ops
        self.added_spans: list[tuple] = []  # add_span: user and log spans, steps of loops without the engine
        self.log = OpLog(record_shapes)
        # data-parallel: (name, bucket, nbytes, start_ns, end_ns, step) per collective and (step, start_ns, end_ns,
        # nbytes, buckets) per wait for gradient buckets, kept by a recorder of the engine's communication methods
        self.comm: list[tuple] = []
        self.comm_waits: list[tuple] = []
        self._comm_recorder = _CommRecorder(self.comm, self.comm_waits) if _COMM_METHODS else None
        self._stack_recorder = _StackRecorder(self.stacks) if with_stack else None
        self._recording = False
        self.started_ns = self.stopped_ns = 0
        # GPU time: the engine's CUDA kernel timer (engine/backend/cuda/timing.py) when a device is in use; its
        # (op index, stream, start_ns, end_ns) records become the trace's GPU lanes. ``added_kernels``: records
        # from elsewhere (a loop timing its own kernels), in the same form.
        self.timer = kernel_timer if kernel_timer is not None else device_timer()
        self.added_kernels: list[tuple] = []

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._recording:
            return
        self.started_ns = time.perf_counter_ns()
        self._recording = True
        hooks.add_recorder(self.log)
        if self._stack_recorder is not None:
            hooks.add_recorder(self._stack_recorder)
        if self._comm_recorder is not None and initialized() is not None:  # collectives report nothing otherwise
            hooks.add_recorder(self._comm_recorder)
        if self.timer is not None:
            self.timer.start()
            hooks.add_recorder(self.timer)

    def stop(self) -> None:
        if not self._recording:
            return
        hooks.remove_recorder(self.log)
        if self._stack_recorder is not None:
            hooks.remove_recorder(self._stack_recorder)
        if self._comm_recorder is not None:
            hooks.remove_recorder(self._comm_recorder)
        if self.timer is not None:
            hooks.remove_recorder(self.timer)
            self.timer.read()  # the ops of a step not ended yet
        self.stopped_ns = time.perf_counter_ns()
        self._recording = False

    @property
    def active(self) -> bool:
        return self._recording

    def clear(self) -> None:
        # NOTE: in place: the log's closure holds these very lists
        self.log.clear()
        del self.stacks[:], self.added_spans[:], self.added_kernels[:], self.comm[:], self.comm_waits[:]
        if self.timer is not None:
            self.timer.clear()
        self.started_ns = time.perf_counter_ns()

    def add_span(self, category: str, name: str, start_ns: int, end_ns: int) -> None:
        self.added_spans.append((category, name, start_ns, end_ns, hooks._step))

    # --- what was recorded, readable (decoded from the log; export time, not per step) ---------------------------
    @property
    def op_count(self) -> int:
        return self.log.op_count()

    @property
    def ops(self) -> list[OpRecord]:
        """The log's ``OpRecord``s (op, phase, module, step, start_ns, end_ns, input_shapes, input_dtypes,
        output_bytes, allocated_bytes, node), in order."""
        return self.log.ops()

    @property
    def kernels(self) -> list[tuple]:
        """(op index, stream, start_ns, end_ns) per op that ran kernels, the op index into ``ops``."""
        return (list(self.timer.records) if self.timer is not None else []) + self.added_kernels

    @property
    def memory(self) -> list[tuple[int, str, int]]:
        """(time_ns, device, allocated_bytes) at the end of each op (profile_memory; [] without)."""
        return self._memory(self.log.ops())

    @property
    def spans(self) -> list[tuple]:
        """(category, name, start_ns, end_ns, step): the log's steps, optimizer steps and input waits, and the added
        spans, by start time."""
        return self._spans(self.log.boundaries())

    def decoded(self) -> tuple[list[OpRecord], list[tuple], list[tuple[int, str, int]]]:
        """``ops``, ``spans`` and ``memory`` from one decoding of the log (what export reads)."""
        ops: list[OpRecord] = []
        boundaries: list[BoundaryRecord] = []
        for record in self.log.records():
            (ops if record.__class__ is OpRecord else boundaries).append(record)
        return ops, self._spans(boundaries), self._memory(ops)

    def _memory(self, ops: list[OpRecord]) -> list[tuple[int, str, int]]:
        if not self.profile_memory:
            return []
        return [(op.end_ns, "cpu", op.allocated_bytes) for op in ops]

    def _spans(self, boundaries: list[BoundaryRecord]) -> list[tuple]:
        started_ns = self.started_ns
        spans = list(self.added_spans)
        for record in boundaries:
            kind = record.kind
            if kind == STEP_END:
                if record.start_ns >= started_ns:
                    spans.append((fmt.CAT_STEP, f"step {record.step}", record.start_ns, record.end_ns, record.step))
            elif kind == OPTIMIZER_STEP:
                spans.append((fmt.CAT_OPTIMIZER, record.name, record.start_ns, record.end_ns, record.step))
            elif kind == DATA_WAIT:
                spans.append((fmt.CAT_DATA, "data", record.start_ns, record.end_ns, record.step))
        spans.sort(key=lambda span: span[2])
        return spans


# NOTE: an engine without data-parallel training has no communication methods: nothing to record then
_COMM_METHODS = "communication" in hooks.RECORDER_METHODS and "comm_wait" in hooks.RECORDER_METHODS


class _CommRecorder:
    """The engine's ``communication`` and ``comm_wait`` events, kept as tuples (see ``Recorder.comm``)."""

    __slots__ = ("comm", "comm_waits")

    def __init__(self, comm: list[tuple], comm_waits: list[tuple]) -> None:
        self.comm, self.comm_waits = comm, comm_waits

    def communication(self, event: Any) -> None:
        self.comm.append((event.name, event.bucket, event.nbytes, event.start_ns, event.end_ns, event.step))

    def comm_wait(self, event: Any) -> None:
        self.comm_waits.append((event.step, event.start_ns, event.start_ns + event.duration_ns, event.nbytes,
                                event.buckets))


class _StackRecorder:
    """``with_stack``: the caller's frames of each op (an ``op_begin`` recorder), aligned with the log's ops."""

    __slots__ = ("stacks",)

    def __init__(self, stacks: list[tuple[str, ...]]) -> None:
        self.stacks = stacks

    def op_begin(self, op: str, module: str, inputs: Any) -> None:
        self.stacks.append(_user_frames())


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
