"""GPU time of each op: CUDA events recorded on the op's stream around it, read at the step end.

``KernelTimer`` is a recorder (``engine.hooks``): ``op_begin`` records a start event and ``op`` an end event on the
current stream — no synchronisation per op. At the step end it waits for the step's last event once, reads every
elapsed time and appends one record per op, ``(op index, stream, start_ns, end_ns)`` on the host's
``perf_counter_ns`` clock, to ``records``; the op index is the op's position, in the order ops end, among the
ops recorded since ``start()`` (the profiler's op log appends the same ops in the same order). Clock alignment:
right after the step end's wait the device is idle, so a reference event recorded then runs at once; its host
time and the events' elapsed times from it place the next step's kernels on the host clock (the first reference
is taken at ``start`` after one synchronisation). ``listeners`` are called after each read with ``(step, step
records)``.
"""
from __future__ import annotations

import time
from typing import Any, Callable

KernelRecord = tuple  # (op index, stream id, start_ns, end_ns)


class KernelTimer:
    recorder_order = -1  # read before other step-end recorders (input_bound reads its records)

    def __init__(self, cupy: Any, listeners: list[Callable[[int, list[KernelRecord]], None]] | None = None) -> None:
        self.cupy = cupy
        self.records: list[KernelRecord] = []
        self.listeners = list(listeners or ())
        self._pending: list[tuple[int, int, Any, Any]] = []  # (op index, stream, start event, end event)
        self._open: list[tuple[int, Any]] = []  # (stream, start event) of ops begun, not ended: a stack (nesting)
        self._spare: list[Any] = []  # events read already, reused
        self._ops = 0
        self._reference: tuple[Any, int] | None = None  # (event, host ns when it ran)

    def start(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()
        self._reference = self._new_reference()

    def clear(self) -> None:
        """Forget what was recorded (the profiler's warm-up); op indices restart at 0."""
        self._spare.extend(event for _, _, start, end in self._pending for event in (start, end))
        self._pending, self._open, self.records, self._ops = [], [], [], 0

    def _event(self) -> Any:
        return self._spare.pop() if self._spare else self.cupy.cuda.Event()

    def _new_reference(self) -> tuple[Any, int]:
        event = self.cupy.cuda.Event()
        event.record()
        return event, time.perf_counter_ns()

    # --- recorder methods ---------------------------------------------------------------------------------------
    def op_begin(self, name: str, module: str, arrays: Any) -> None:
        if not arrays or not isinstance(arrays[0], self.cupy.ndarray):  # a host op: no kernels to time
            self._open.append((0, None))
            return
        stream = self.cupy.cuda.get_current_stream()
        event = self._event()
        event.record(stream)
        self._open.append((stream.ptr, event))

    def op(self, name: str, module: str, arrays: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        # NOTE: the index is taken when the op ends, as the op log appends it (a user op's inner ops come first)
        index = self._ops
        self._ops += 1
        if not self._open:
            return
        stream, start = self._open.pop()
        if start is None:
            return
        end = self._event()
        end.record(self.cupy.cuda.get_current_stream())
        self._pending.append((index, stream, start, end))

    def step_end(self, event: Any) -> None:
        self._open.clear()  # an op that raised never ended (the op log has no record of it either)
        read = self.read()
        for listener in self.listeners:
            listener(event.step, read)

    # --- reading --------------------------------------------------------------------------------------------------
    def read(self) -> list[KernelRecord]:
        """Wait for the recorded events once and turn them into records (also done at every step end)."""
        if not self._pending:
            return []
        elapsed_ms = self.cupy.cuda.get_elapsed_time
        self._pending[-1][3].synchronize()
        self.cupy.cuda.get_current_stream().synchronize()
        reference, reference_ns = self._reference or self._new_reference()
        read = [(index, stream, reference_ns + int(elapsed_ms(reference, start) * 1e6),
                 reference_ns + int(elapsed_ms(reference, end) * 1e6)) for index, stream, start, end in self._pending]
        self._spare.extend(event for _, _, start, end in self._pending for event in (start, end))
        self._pending = []
        self._reference = self._new_reference()
        self.records.extend(read)
        return read


def timer() -> KernelTimer | None:
    """A timer for the CUDA device in use, or None when CuPy or a device is missing (nothing to time)."""
    from engine.backend.cuda_backend import cupy
    if cupy is None:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001 - no driver: nothing to time
        return None
    return KernelTimer(cupy)
