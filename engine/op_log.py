"""OpLog: the profiler's recorder — a few ints per op in a flat list, with no event object — and its decoder.

An ``OpLog`` is a recorder (``engine.hooks.add_recorder(log)``): every op (forward ``Function.__call__`` and each
backward ``Function.backward`` run by autograd) and every step boundary appends one record to ``log.data``. Readers
never index ``data``: ``log.records()`` decodes it, once, into named records, in the order they were appended:

- ``OpRecord``: ``op, phase, module, step, start_ns, end_ns, input_shapes, input_dtypes, output_bytes,
  allocated_bytes, node``. Times are ``time.perf_counter_ns()``: the start is taken right before the op computes
  (after ``op_begin`` recorders), the end when the log's ``op`` is called, after the result is registered with the
  allocator (backward ops: right after ``backward`` returns); its ``recorder_order`` of -1 puts it before other
  recorders. ``allocated_bytes`` is the allocator's cpu total at the end. ``record_shapes=False``: shapes and
  dtypes are ``()``. ``node``: the graph node id of an op replayed by ``engine.function``, else None.
- ``BoundaryRecord``: ``kind, step, start_ns, end_ns, name``, one of
  ``STEP_END`` (``hooks.mark_step_end``; the start is the step's begin), ``OPTIMIZER_STEP`` (``Optimizer.step``,
  around the parameter updates; ``name`` is ``"<optimizer type>.step"``) and ``DATA_WAIT``
  (``hooks.report_data_wait``: the wait that just ended),

so a profiler holding the log needs no other step, optimizer or data-wait recorder. Several logs may record at once.

NOTE: the storage is the one speed trick, kept in this file: an op appends ``_STRIDE`` ints with one
``list.extend`` (a closure over the log's containers; no object per op survives, so recording adds no work for the
cycle collector): a key code (an index into ``keys``, interned once per distinct op, phase, module, shapes and
dtypes; boundary records use the negative kind instead), step, start_ns, end_ns, and two kind-specific ints
(ops: output bytes, allocated bytes; optimizer steps: an index into ``names``). ``records()`` is the only reader of
that layout.
"""
from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple, Union

from engine import hooks as _hooks
from engine import memory as _memory

_STRIDE = 6  # ints per record (see the NOTE above)
STEP_END = -1
OPTIMIZER_STEP = -2
DATA_WAIT = -3
_now = time.perf_counter_ns


class OpRecord(NamedTuple):
    """One op of the log (see the module docstring)."""

    op: str
    phase: str
    module: str
    step: int
    start_ns: int
    end_ns: int
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_bytes: int
    allocated_bytes: int
    node: str | None


class BoundaryRecord(NamedTuple):
    """A step end, an optimizer step or a data wait (``kind``: ``STEP_END``, ``OPTIMIZER_STEP``, ``DATA_WAIT``)."""

    kind: int
    step: int
    start_ns: int
    end_ns: int
    name: str  # OPTIMIZER_STEP: "<optimizer type>.step"; "" for the others


Record = Union[OpRecord, BoundaryRecord]


class OpLog:
    """Per-op and boundary records (see the module docstring); ``records()`` reads them, ``clear()`` empties ``data``
    and keeps the interned keys.

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

    def records(self) -> list[Record]:
        """Every record so far, decoded, in the order appended: ``OpRecord`` and ``BoundaryRecord``."""
        keys, names, nodes, data = self.keys, self.names, self.nodes, self.data
        decoded: list[Record] = []
        append, make_op, make_boundary = decoded.append, OpRecord._make, BoundaryRecord._make
        # NOTE: the one place that knows the layout: zip over one iterator takes the ints _STRIDE at a time
        for code, step, start_ns, end_ns, fifth, sixth in zip(*[iter(data)] * _STRIDE):
            if code >= 0:
                op, phase, module, shapes, dtypes = keys[code]
                append(make_op((op, phase, module, step, start_ns, end_ns, shapes, dtypes, fifth, sixth,
                                nodes.get(code))))
            else:
                append(make_boundary((code, step, start_ns, end_ns, names[fifth] if code == OPTIMIZER_STEP else "")))
        return decoded

    def op_count(self) -> int:
        """How many ``OpRecord``s ``records()`` would return (without decoding them)."""
        return sum(1 for code in self.data[::_STRIDE] if code >= 0)

    def ops(self) -> list[OpRecord]:
        """The op records of ``records()``."""
        return [record for record in self.records() if record.__class__ is OpRecord]

    def boundaries(self) -> list[BoundaryRecord]:
        """The boundary records of ``records()``."""
        return [record for record in self.records() if record.__class__ is BoundaryRecord]

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
    lookup, intern, extend = log._codes.get, log.intern_raw, log.data.extend
    shapes, nodes = log.record_shapes, log.nodes
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
