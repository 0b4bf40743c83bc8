"""OpLog: the profiler's recorder — a few ints per op in a flat list, with no event object.

An ``OpLog`` is a recorder (``engine.hooks.add_recorder(log)``): every op (forward ``Function.__call__`` and each
backward ``Function.backward`` run by autograd) extends ``log.data`` with ``OP_LOG_STRIDE`` ints:

    key code, step, start_ns, end_ns, output_bytes, allocated_bytes

``key code`` indexes ``log.keys``: ``(op, phase, module, input_shapes, input_dtype_names)``, interned once per
distinct key (``record_shapes=False``: shapes and dtypes are ``()``). Times are ``time.perf_counter_ns()``: the
start is taken right before the op computes (after ``op_begin`` recorders), the end when the log's ``op`` is called,
after the result is registered with the allocator (backward ops: right after ``backward`` returns); its
``recorder_order`` of -1 puts it before other recorders. ``allocated_bytes`` is the allocator's cpu total at the
end. Several logs may record at once.

It also appends the step's boundaries, in the same stride with a negative code (never a key's index):

    STEP_END,       step, step_start_ns, end_ns, 0, 0           hooks.mark_step_end (the step's begin is its start)
    OPTIMIZER_STEP, step, start_ns,      end_ns, name code, 0   Optimizer.step, around the parameter updates;
                                                                names[name code] is "<optimizer type>.step"
    DATA_WAIT,      step, start_ns,      end_ns, 0, 0           hooks.report_data_wait (the wait just ended)

so a profiler holding the log needs no other step, optimizer or data-wait recorder. Ops replayed by
``engine.function`` get a code per graph node: ``log.nodes[code]`` is the node id (``engine.hooks.graph_node``).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from engine import hooks as _hooks
from engine import memory as _memory

OP_LOG_STRIDE = 6
STEP_END = -1
OPTIMIZER_STEP = -2
DATA_WAIT = -3
_now = time.perf_counter_ns


class OpLog:
    """Flat per-op records (see the module docstring); ``clear()`` empties ``data`` and keeps the interned keys.

    ``op(op, module, inputs, outputs, output_bytes, start_ns)`` — the recorder method — appends one op of
    ``module`` that started at ``start_ns`` and ends now. It is a closure over this log's containers, built once:
    the engine calls it for every op, and a closure reads its variables faster than a method reads attributes."""

    __slots__ = ("data", "keys", "names", "record_shapes", "op", "extend", "name_codes", "_codes", "_optimizer_start",
                 "nodes")
    # the boundary records' codes (see the module docstring), readable from the log
    STEP_END, OPTIMIZER_STEP, DATA_WAIT = STEP_END, OPTIMIZER_STEP, DATA_WAIT
    recorder_order = -1  # a reading: the op's end time is taken before other recorders' work

    def __init__(self, record_shapes: bool = True) -> None:
        self.data: list[int] = []
        self.keys: list[tuple[str, str, str, tuple[tuple[int, ...], ...], tuple[str, ...]]] = []
        self.record_shapes = bool(record_shapes)
        self._codes: dict[tuple, int] = {}  # raw key (see _recorder) -> index in keys
        self.names: list[str] = []  # span names of OPTIMIZER_STEP records ("Adam.step")
        self.name_codes: dict[Any, int] = {}  # optimizer type -> index in names
        self.nodes: dict[int, str] = {}  # key code -> graph node id, for ops replayed by engine.function
        self.op = _recorder(self)
        self.extend = self.data.extend
        self._optimizer_start: int | None = None

    # --- the boundary records (recorder methods) ---------------------------------------------------------------
    def step_end(self, event: _hooks.StepEvent) -> None:
        self.extend((STEP_END, event.step, event.time_ns - event.duration_ns, event.time_ns, 0, 0))

    def data_wait(self, event: _hooks.DataWaitEvent) -> None:
        self.extend((DATA_WAIT, event.step, event.time_ns - event.wait_ns, event.time_ns, 0, 0))

    def optimizer_step_begin(self, event: _hooks.OptimizerEvent) -> None:
        self._optimizer_start = event.time_ns

    def optimizer_step_end(self, event: _hooks.OptimizerEvent) -> None:
        start, self._optimizer_start = self._optimizer_start, None
        if start is not None:
            self.extend((OPTIMIZER_STEP, event.step, start, event.time_ns, self.optimizer_code(type(event.optimizer)),
                         0))

    def optimizer_code(self, optimizer_type: type) -> int:
        """The index in ``names`` of ``optimizer_type``'s step span name."""
        code = self.name_codes.get(optimizer_type)
        if code is None:
            code = self.name_codes[optimizer_type] = len(self.names)
            self.names.append(optimizer_type.__name__ + ".step")
        return code

    def clear(self) -> None:
        del self.data[:]

    def intern_raw(self, key: tuple, arrays: Any) -> int:
        """The code of a raw key (built by ``op`` from ``arrays``), interning its readable form on first sight.
        A replayed node's raw key is ``(node id, raw key)``; its readable key is the op's."""
        code = self._codes[key] = len(self.keys)
        if type(key[1]) is tuple:
            key = key[1]
        shapes = tuple(tuple(a.shape) for a in arrays) if self.record_shapes else ()
        dtypes = tuple(_hooks.dtype_name(a.dtype) for a in arrays) if self.record_shapes else ()
        self.keys.append((key[0], key[1], key[2], shapes, dtypes))
        return code

    def intern(self, key: tuple[str, str, str, tuple[tuple[int, ...], ...], tuple[str, ...]]) -> int:
        """The code of a readable key (``keys``' layout), for records appended by others than ``op``.

        NOTE: readable keys are wrapped in a 1-tuple in the shared table: they never compare equal to a raw key."""
        wrapped = (key,)
        code = self._codes.get(wrapped)
        if code is None:
            code = self._codes[wrapped] = len(self.keys)
            self.keys.append(key)
        return code


def _recorder(log: OpLog) -> Callable[[str, str, Any, Any, int, int], None]:
    """``log.op``: the per-op append (see OpLog)."""
    lookup, intern, extend, shapes, nodes = log._codes.get, log.intern_raw, log.data.extend, log.record_shapes, log.nodes
    cpu, hooks, now = _memory._state("cpu"), _hooks, _now  # NOTE: the cpu state object lives as long as the process

    def op(name: str, module: str, arrays: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        end_ns = now()
        # NOTE: the raw key is flat and unrolled for 1-3 inputs: no comprehension (a frame per call on 3.11), and
        # dtype objects instead of their names (a name costs a dict lookup per input).
        count = len(arrays) if shapes else -1
        if count == 1:
            a = arrays[0]
            key = (name, hooks.phase, module, a.shape, a.dtype)
        elif count == 2:
            a, b = arrays
            key = (name, hooks.phase, module, a.shape, a.dtype, b.shape, b.dtype)
        elif count == 3:
            a, b, c = arrays
            key = (name, hooks.phase, module, a.shape, a.dtype, b.shape, b.dtype, c.shape, c.dtype)
        elif count < 0:
            key = (name, hooks.phase, module)
        else:
            key = (name, hooks.phase, module, *[(a.shape, a.dtype) for a in arrays])
        node = hooks.graph_node
        if node is not None:  # a replayed graph node: its own code, so that its records name it
            key = (node, key)
        code = lookup(key)
        if code is None:
            code = intern(key, arrays)
            if node is not None:
                nodes[code] = node
        extend((code, hooks._step, start_ns, end_ns, output_bytes, cpu.allocated))

    return op
