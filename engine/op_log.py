"""OpLog: the profiler's fast path — the engine appends a few ints per op, with no event object and no observer call.

While an ``OpLog`` is installed (``engine.hooks.set_op_log(log)``), every op (forward ``Function.__call__`` and
each backward ``Function.backward`` run by autograd) extends ``log.data`` with ``OP_LOG_STRIDE`` ints:

    key code, step, start_ns, end_ns, output_bytes, allocated_bytes

``key code`` indexes ``log.keys``: ``(op, phase, module, input_shapes, input_dtype_names)``, interned once per
distinct key (``record_shapes=False``: shapes and dtypes are ``()``). Times are ``time.perf_counter_ns()``: the
start is taken right before the op computes, the end after its result is registered with the allocator
(backward ops: right after ``backward`` returns). ``allocated_bytes`` is the allocator's cpu total at the end.
One log at a time; observers (``op_start``/``op_end``) keep working alongside it.

The engine also appends the step's boundaries, in the same stride with a negative code (never a key's index):

    STEP_END,       step, step_start_ns, end_ns, 0, 0           hooks.mark_step_end (the step's begin is its start)
    OPTIMIZER_STEP, step, start_ns,      end_ns, name code, 0   Optimizer.step, around the parameter updates;
                                                                names[name code] is "<optimizer type>.step"
    DATA_WAIT,      step, start_ns,      end_ns, 0, 0           hooks.report_data_wait (the wait just ended)

so a profiler holding the log needs no step, optimizer or data-wait observer. The hook events are still emitted
to subscribed observers, after the record is appended.
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

    ``record(op, module, arrays, start_ns, output_bytes)`` appends one op of ``module`` that started at ``start_ns``
    and ends now (``arrays``: its input arrays). It is a closure over this log's containers, built once: the engine
    calls it for every op, and a closure reads its variables faster than a method reads attributes."""

    __slots__ = ("data", "keys", "names", "record_shapes", "record", "extend", "name_codes", "_codes")
    # the boundary records' codes (see the module docstring), readable from the log the engine holds
    STEP_END, OPTIMIZER_STEP, DATA_WAIT = STEP_END, OPTIMIZER_STEP, DATA_WAIT

    def __init__(self, record_shapes: bool = True) -> None:
        self.data: list[int] = []
        self.keys: list[tuple[str, str, str, tuple[tuple[int, ...], ...], tuple[str, ...]]] = []
        self.record_shapes = bool(record_shapes)
        self._codes: dict[tuple, int] = {}  # raw key (see _recorder) -> index in keys
        self.names: list[str] = []  # span names of OPTIMIZER_STEP records ("Adam.step")
        self.name_codes: dict[Any, int] = {}  # optimizer type -> index in names
        self.record = _recorder(self)
        self.extend = self.data.extend  # the engine appends boundary records with it

    def optimizer_code(self, optimizer_type: type) -> int:
        """The index in ``names`` of ``optimizer_type``'s step span name (the engine looks in ``name_codes`` first)."""
        code = self.name_codes.get(optimizer_type)
        if code is None:
            code = self.name_codes[optimizer_type] = len(self.names)
            self.names.append(optimizer_type.__name__ + ".step")
        return code

    def clear(self) -> None:
        del self.data[:]

    def intern_raw(self, key: tuple, arrays: Any) -> int:
        """The code of a raw key (built by ``record`` from ``arrays``), interning its readable form on first sight."""
        code = self._codes[key] = len(self.keys)
        shapes = tuple(tuple(a.shape) for a in arrays) if self.record_shapes else ()
        dtypes = tuple(_hooks.dtype_name(a.dtype) for a in arrays) if self.record_shapes else ()
        self.keys.append((key[0], key[1], key[2], shapes, dtypes))
        return code

    def intern(self, key: tuple[str, str, str, tuple[tuple[int, ...], ...], tuple[str, ...]]) -> int:
        """The code of a readable key (``keys``' layout), for records appended by an observer instead of the engine.

        NOTE: readable keys are wrapped in a 1-tuple in the shared table: they never compare equal to a raw key."""
        wrapped = (key,)
        code = self._codes.get(wrapped)
        if code is None:
            code = self._codes[wrapped] = len(self.keys)
            self.keys.append(key)
        return code


def _recorder(log: OpLog) -> Callable[[str, str, Any, int, int], None]:
    """``log.record``: the per-op append (see OpLog)."""
    lookup, intern, extend, shapes = log._codes.get, log.intern_raw, log.data.extend, log.record_shapes
    cpu, hooks, now = _memory._state("cpu"), _hooks, _now  # NOTE: the cpu state object lives as long as the process

    def record(op: str, module: str, arrays: Any, start_ns: int, output_bytes: int) -> None:
        end_ns = now()
        # NOTE: the raw key is flat and unrolled for 1-3 inputs: no comprehension (a frame per call on 3.11), and
        # dtype objects instead of their names (a name costs a dict lookup per input).
        count = len(arrays) if shapes else -1
        if count == 1:
            a = arrays[0]
            key = (op, hooks.phase, module, a.shape, a.dtype)
        elif count == 2:
            a, b = arrays
            key = (op, hooks.phase, module, a.shape, a.dtype, b.shape, b.dtype)
        elif count == 3:
            a, b, c = arrays
            key = (op, hooks.phase, module, a.shape, a.dtype, b.shape, b.dtype, c.shape, c.dtype)
        elif count < 0:
            key = (op, hooks.phase, module)
        else:
            key = (op, hooks.phase, module, *[(a.shape, a.dtype) for a in arrays])
        code = lookup(key)
        if code is None:
            code = intern(key, arrays)
        extend((code, hooks._step, start_ns, end_ns, output_bytes, cpu.allocated))

    return record
