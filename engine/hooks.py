"""The engine's one way out of its hot paths — a list of recorders — and where the training thread is.

A recorder is any object with a subset of the methods in ``RECORDER_METHODS`` (``engine.recorders.Recorder``
documents each, and the event types; a subclass of it is called only for the methods it overrides);
``add_recorder`` puts it in the one list ``recorders`` and ``remove_recorder`` takes it out. For speed the engine
reads, per method, a tuple of the bound methods of the recorders that have it (``hooks.op``, ``hooks.step_end`` …,
rebuilt from ``recorders`` on every change), so with no recorder a hook point costs one attribute load and a truth
test (per op: the one flag ``call_hooks_due``).
Recorders are called in the order of their ``recorder_order`` (default 0; the engine's own readings, the op log and
the allocator's step logs, use -1 so they read before others work; ``engine.function``'s tracer -2), then of
addition.

This module is the engine's one dispatch core: every hook point reaches its recorders through ``emit`` (the one
loop, with the one error rule below); the op records of forward ops (``engine.op.Function``), backward nodes
(``engine.autograd``) and replayed graph nodes (``engine.graph.replay``) through ``record_op_begin`` and
``record_op``. No other module loops over a recorder tuple.

Users' observers (``subscribe``) keep their event interface — ``op_start(OpEvent)``, ``op_end(OpEvent)``,
``alloc(MemoryEvent)``, ``free(MemoryEvent)`` and the event methods recorders share — through an adapter recorder
that builds the events. An exception raised by a recorder or an observer is reported once (per object and method,
kept by the object until it is removed) on stderr and it keeps receiving later calls: observing must never break
training. The one exception is a ``PropagatingError`` (e.g. ``engine.NonFiniteError``), raised on purpose to stop
the computation. Hook state is process-global and meant for the training thread.
"""
from __future__ import annotations

import sys
import time
from typing import Any

from engine.recorders import (RECORDER_METHODS, CommEvent, CommWaitEvent, DataWaitEvent, MemoryEvent, ModuleEvent,
                              OomEvent, OpEvent, OptimizerEvent, Recorder, StepEvent)

__all__ = ["RECORDER_METHODS", "HOOK_POINTS", "CommEvent", "CommWaitEvent", "DataWaitEvent", "MemoryEvent",
           "ModuleEvent", "OomEvent", "OpEvent", "OptimizerEvent", "PropagatingError", "Recorder", "StepEvent",
           "add_recorder", "remove_recorder", "subscribe", "unsubscribe", "observers", "emit", "record_op_begin",
           "record_op", "record_module_begin", "record_module_end", "report_failure", "enter_site_scope",
           "exit_site_scope", "dtype_name", "op_event", "current_step", "step_of_record", "step_is_open",
           "current_module", "current_phase", "set_phase", "mark_step_begin", "begin_step_at_op",
           "mark_step_end", "cancel_step_begin", "report_data_wait", "reset_step"]

# What a user's observer may implement (``subscribe``).
HOOK_POINTS = ("op_start", "op_end", "alloc", "free", "oom", "step_begin", "step_end", "data_wait", "module_begin",
               "module_end", "optimizer_step_begin", "optimizer_step_end", "communication", "comm_wait")
# The observer methods a recorder shares (same name, same event object): passed on without an adapter call.
_SHARED_POINTS = ("oom", "step_begin", "step_end", "data_wait", "module_begin", "module_end", "optimizer_step_begin",
                  "optimizer_step_end", "communication", "comm_wait")

recorders: list[Any] = []  # the one list, in call order
_methods_of: dict[int, tuple] = {}  # id(recorder) -> its (method name, bound method, owner) found when it was added

# Per recorder method: the bound methods of the recorders that have it, in call order (kept by _rebuild).
op_begin: tuple = ()
op: tuple = ()
call_begin: tuple = ()
call: tuple = ()
backward_begin: tuple = ()
backward_node: tuple = ()
gradient_sum: tuple = ()
leaf_grad: tuple = ()
buffer_alloc: tuple = ()
buffer_free: tuple = ()
buffer_history: tuple = ()
at_peak: tuple = ()
oom: tuple = ()
step_begin: tuple = ()
step_end: tuple = ()
data_wait: tuple = ()
module_begin: tuple = ()
module_end: tuple = ()
module_call: tuple = ()
optimizer_call: tuple = ()
zero_grad: tuple = ()
before_update: tuple = ()
optimizer_step_begin: tuple = ()
optimizer_step_end: tuple = ()
communication: tuple = ()
comm_wait: tuple = ()
allocation_site: Any = None  # the first recorder's allocation_site, or None (only one site is kept per buffer)
ops_observed: bool = False  # a recorder of ops (op_begin, op, call_begin, call, backward_node): backward's one test
call_hooks_due: bool = True  # ops_observed, or no step open (the op opens it): Function.__call__'s one test
module_observed: bool = False  # module_begin or module_end or module_call: Module.__call__'s one test
optimizer_observed: bool = False  # optimizer_step_begin or optimizer_step_end: Optimizer.step's one test
memory_observed: bool = False  # buffer_alloc or buffer_free or buffer_history or allocation_site
free_observed: bool = False  # buffer_free or buffer_history: release()'s one test

# The allocation site shared by every allocation of the engine call running now (``enter_site_scope``): while set,
# the allocator records it instead of asking ``allocation_site`` again. None outside.
site_scope: Any = None

_observers: list[tuple[Any, Any]] = []  # (user's observer, its adapter recorder)
_owners: list[tuple[Any, Any, str]] = []  # (callable the engine calls, the object reported for it, method name)
_failed: list[tuple[Any, str]] = []  # (object, method name) whose failure was reported; forgotten on removal

# Where the training thread is: module path stack (the sentinel "" is the top level), phase and step.
module_stack: list[str] = [""]
phase: str = "forward"
_step: int = 0
_step_open: bool = False
step_resets: int = 0  # reset_step calls so far
_step_start_ns: int = 0
graph_node: str | None = None  # the graph node a traced step is replaying (engine.function), None otherwise


class PropagatingError(Exception):
    """Base of errors a recorder raises on purpose to stop the computation; hooks let these through."""


def _implemented(recorder: Any, name: str) -> Any:
    """``recorder``'s method ``name`` if it has one that is not ``Recorder``'s empty default, else None."""
    method = getattr(recorder, name, None)
    if not callable(method) or getattr(method, "__func__", None) is Recorder.__dict__.get(name):
        return None
    return method


# --- the recorder list -----------------------------------------------------------------------------------------

def add_recorder(recorder: Any) -> Any:
    """Put ``recorder`` in the list (once; adding it again does nothing); returns it (the handle)."""
    if any(r is recorder for r in recorders):
        return recorder
    owner = getattr(recorder, "observer", recorder) if isinstance(recorder, _ObserverRecorder) else recorder
    methods = tuple((name, method, owner) for name in RECORDER_METHODS
                    if (method := _implemented(recorder, name)) is not None)
    if not methods:
        raise TypeError(f"{type(recorder).__name__} has none of the recorder methods {', '.join(RECORDER_METHODS)}")
    order = getattr(recorder, "recorder_order", 0)
    at = len(recorders)
    while at and getattr(recorders[at - 1], "recorder_order", 0) > order:
        at -= 1
    recorders.insert(at, recorder)
    _methods_of[id(recorder)] = methods
    _rebuild()
    return recorder


def remove_recorder(recorder: Any) -> None:
    """Take ``recorder`` out of the list and forget its reported failures; unknown ones are ignored."""
    kept = [r for r in recorders if r is not recorder]
    if len(kept) == len(recorders):
        return
    recorders[:] = kept
    _methods_of.pop(id(recorder), None)
    _forget(recorder)
    _rebuild()


def _rebuild() -> None:
    """The per-method tuples and flags from ``recorders`` (their methods as found when added); ``_owners``."""
    global allocation_site, ops_observed, call_hooks_due, module_observed, optimizer_observed, memory_observed, \
        free_observed
    owners = [entry for entry in _owners if entry[2] in HOOK_POINTS and entry[2] not in _SHARED_POINTS]
    by_name: dict[str, list[Any]] = {name: [] for name in RECORDER_METHODS}
    for recorder in recorders:
        for name, method, owner in _methods_of[id(recorder)]:
            by_name[name].append(method)
            owners.append((method, owner, name))
    module = globals()
    for name, methods in by_name.items():
        module[name] = tuple(methods) if name != "allocation_site" else (methods[0] if methods else None)
    _owners[:] = owners
    ops_observed = bool(op_begin or op or call_begin or call or backward_node)
    call_hooks_due = ops_observed or not _step_open
    module_observed = bool(module_begin or module_end or module_call)
    optimizer_observed = bool(optimizer_step_begin or optimizer_step_end)
    memory_observed = bool(buffer_alloc or buffer_free or buffer_history or allocation_site is not None)
    free_observed = bool(buffer_free or buffer_history)


# --- users' observers: the event interface, adapted to the recorder list --------------------------------------------

class _ObserverRecorder:
    """A user's observer as a recorder: shared event methods are the observer's own bound methods (no extra call);
    op_start/op_end and alloc/free get their events built here."""

    def __init__(self, observer: Any) -> None:
        self.observer = observer
        for name in _SHARED_POINTS:
            method = getattr(observer, name, None)
            if callable(method):
                setattr(self, name, method)
        self._starts, self._ends, self._allocs, self._frees = (
            _observer_methods(observer, name) for name in ("op_start", "op_end", "alloc", "free"))
        if self._starts:
            self.op_begin = self._op_begin
        if self._ends:
            self.op = self._op
        if self._allocs:
            self.buffer_alloc = self._buffer_alloc
        if self._frees:
            self.buffer_free = self._buffer_free

    def _op_begin(self, name: str, module: str, inputs: Any) -> None:
        emit(self._starts, op_event(name, module, inputs))

    def _op(self, name: str, module: str, inputs: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        if not (outputs.__class__ is tuple and len(outputs) == 1 and outputs[0] is not None):  # a forward op's (out,)
            outputs = tuple([o for o in outputs if o is not None])
        emit(self._ends, op_event(name, module, inputs, outputs, output_bytes))

    def _buffer_alloc(self, buffer_id: int, nbytes: int, device: str, category: str, op_name: str, shape: Any,
                      dtype: Any) -> None:
        emit(self._allocs, _new_tuple(MemoryEvent, (
            "alloc", nbytes, device, buffer_id, category, op_name, module_stack[-1], phase, _step,
            shape if shape.__class__ is tuple else tuple(shape), _dtype_names.get(dtype) or dtype_name(dtype),
            _now())))

    def _buffer_free(self, buffer_id: int, nbytes: int, device: str, category: str, op_name: str) -> None:
        emit(self._frees, _new_tuple(MemoryEvent, ("free", nbytes, device, buffer_id, category, "", module_stack[-1],
                                                   phase, _step, (), "", _now())))


def _observer_methods(observer: Any, name: str) -> tuple:
    method = getattr(observer, name, None)
    if not callable(method):
        return ()
    _owners.append((method, observer, name))
    return (method,)


def subscribe(observer: Any) -> Any:
    """Attach ``observer`` to every hook point it has a method for; returns the observer (the handle)."""
    if any(o is observer for o, _ in _observers):
        return observer
    if not any(callable(getattr(observer, name, None)) for name in HOOK_POINTS):
        raise TypeError(f"{type(observer).__name__} has none of the hook methods {', '.join(HOOK_POINTS)}")
    adapter = _ObserverRecorder(observer)
    _observers.append((observer, adapter))
    add_recorder(adapter)
    return observer


def unsubscribe(observer: Any) -> None:
    """Detach ``observer`` from every hook point; unknown observers are ignored."""
    for known, adapter in _observers:
        if known is observer:
            _observers[:] = [entry for entry in _observers if entry[0] is not observer]
            _owners[:] = [entry for entry in _owners if entry[1] is not observer]
            _forget(observer)
            remove_recorder(adapter)
            return


def observers() -> tuple[Any, ...]:
    """Everything attached: the users' observers and the other recorders."""
    return tuple(getattr(r, "observer", r) if isinstance(r, _ObserverRecorder) else r for r in recorders)


# --- calling recorders ---------------------------------------------------------------------------------------------

def emit(methods: tuple, *args: Any) -> None:
    """Call each of ``methods`` (a per-method tuple, e.g. ``hooks.step_end``) with ``args``: a PropagatingError goes
    through, any other error is reported once (``report_failure``) and the others are still called."""
    global site_scope
    scope = site_scope
    if scope is not None:  # a recorder is code of its own: what it allocates is not the engine call's
        site_scope = None  # NOTE: cleared here, not in a helper: the allocator emits inside backward's scope
    try:
        for method in methods:
            try:
                method(*args)
            except Exception as error:  # noqa: BLE001 - observing must never break training
                _recorder_raised(method, error)
    finally:
        if scope is not None:
            site_scope = scope


def _recorder_raised(method: Any, error: Exception) -> None:
    """The one rule for a recorder's exception: a ``PropagatingError`` goes through, any other is reported once."""
    if isinstance(error, PropagatingError):
        raise error
    report_failure(method, error)


def record_op_begin(name: str, module: str, inputs: Any) -> None:
    """``op_begin`` recorders, for a forward op, a backward node or a replayed node: the one caller of that point
    (callers test ``hooks.op_begin`` first)."""
    emit(op_begin, name, module, inputs)


def record_op(name: str, module: str, inputs: Any, outputs: tuple, start_ns: int) -> None:
    """``op`` recorders (``output_bytes``: the size of ``outputs``' arrays; None entries are inputs without a
    gradient): the one caller of that point, for forward ops, backward nodes and replayed nodes. It calls them
    itself (``emit``'s loop and rule, one frame less per observed op)."""
    methods = op
    if not methods:
        return
    nbytes = 0
    for out in outputs:
        if out is not None:
            nbytes += getattr(out, "nbytes", 0)
    if site_scope is not None:
        _emit_outside_site_scope(methods, (name, module, inputs, outputs, nbytes, start_ns))
        return
    for method in methods:
        try:
            method(name, module, inputs, outputs, nbytes, start_ns)
        except Exception as error:  # noqa: BLE001 - observing must never break training
            _recorder_raised(method, error)


def record_module_begin(path: str, module_type: str) -> None:
    """``module_begin`` recorders, for a module call (``Module.__call__``) or its replayed node: the one caller."""
    if module_begin:
        emit(module_begin, ModuleEvent(path, module_type, _step, _now()))


def record_module_end(path: str, module_type: str) -> None:
    """``module_end`` recorders, for a module call or its replayed node: the one caller."""
    if module_end:
        emit(module_end, ModuleEvent(path, module_type, _step, _now()))


def _emit_outside_site_scope(methods: tuple, args: tuple) -> None:
    global site_scope
    scope, site_scope = site_scope, None
    try:
        emit(methods, *args)
    finally:
        site_scope = scope


def report_failure(method: Any, error: Exception) -> None:
    """Say once per object and method that ``method`` (a callable the engine called) failed; the call is skipped."""
    owner, name = next(((o, n) for m, o, n in _owners if m is method), (method, getattr(method, "__name__", "?")))
    if any(o is owner and n == name for o, n in _failed):
        return
    _failed.append((owner, name))
    print(f"engine.hooks: {type(owner).__name__}.{name} failed and is skipped for this event "
          f"({type(error).__name__}: {error}); further failures are not reported", file=sys.stderr)


def _forget(owner: Any) -> None:
    _failed[:] = [(o, n) for o, n in _failed if o is not owner]


def enter_site_scope() -> Any:
    """At the entry of an engine call that runs no user code while it allocates (``backward()``): ask the
    ``allocation_site`` recorder once, here, for the site every allocation of the call gets (the caller's line, as
    each allocation's own stack walk would find it). Returns what ``exit_site_scope`` restores. Engine code that
    calls user code inside the scope (a user-defined op's backward, ``emit``) clears ``site_scope`` for that call."""
    global site_scope
    previous, site = site_scope, allocation_site
    if site is None or previous is not None:
        return previous
    try:
        site_scope = site()
    except Exception as error:  # noqa: BLE001 - recording must never break the computation
        report_failure(site, error)
    return previous


def exit_site_scope(previous: Any) -> None:
    global site_scope
    site_scope = previous


_dtype_names: dict[Any, str] = {}
# NOTE: the one speed trick for events: the per-op and per-allocation events of users' observers (op_event, the
# adapter's MemoryEvent) are built as tuple.__new__(cls, values), which skips the NamedTuple's Python-level __new__
# (about 2x per event); events once per step use their constructors.
_new_tuple = tuple.__new__
_now = time.perf_counter_ns


def dtype_name(dtype: Any) -> str:
    """``str(dtype)``, memoized: NumPy computes dtype names in Python (about 4 us each), once per op input."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype)
    return name


def op_event(name: str, module: str, arrays: Any, outputs: tuple[Any, ...] = (), output_bytes: int = 0) -> OpEvent:
    """The event of op ``name`` of ``module`` now: its start (no outputs) or its end."""
    names = _dtype_names  # NOTE: list comprehensions, not generators (~3x)
    return _new_tuple(OpEvent, (name, phase, module, _step, tuple([a.shape for a in arrays]),
                                tuple([names.get(a.dtype) or dtype_name(a.dtype) for a in arrays]), tuple(arrays),
                                outputs, output_bytes, _now()))


# --- where the training thread is -------------------------------------------------------------------

def current_step() -> int:
    """The index of the training step in progress (0 before the first ``optimizer.step()``)."""
    return _step


def step_of_record() -> int:
    """The step a value recorded now belongs to: the step in progress, or the one that just ended (0 before any)."""
    return _step if _step_open or not _step else _step - 1


def step_is_open() -> bool:
    """Whether the step ``current_step()`` has begun (and not ended yet)."""
    return _step_open


def current_module() -> str:
    """Dotted path of the innermost ``Module`` being called ("" outside any module)."""
    return module_stack[-1]


def current_phase() -> str:
    return phase


def set_phase(name: str) -> str:
    """Set the phase (``forward``/``backward``/``optimizer``) and return the previous one."""
    global phase
    previous, phase = phase, name
    return previous


def mark_step_begin() -> None:
    """Open the current step if it is not open yet: the data pipeline and ``fit`` call this, and so does the first
    forward op after a step ended (``Function.__call__``, each graph replay), observed or not — step numbers never
    depend on what is attached."""
    global _step_open, _step_start_ns, call_hooks_due
    if _step_open:
        return
    _step_open, call_hooks_due = True, ops_observed
    _step_start_ns = _now()
    if step_begin:
        emit(step_begin, StepEvent(_step, _step_start_ns, 0))


def begin_step_at_op() -> None:
    """A forward op is about to run (``Function.__call__``): it opens the step if none is open."""
    if not _step_open and phase == "forward":
        mark_step_begin()


def mark_step_end() -> None:
    """Close the current step (``optimizer.step()`` calls this) and advance the step counter; ``step_end``
    recorders get the step's ``StepEvent`` (its duration since ``step_begin``)."""
    global _step_open, _step, call_hooks_due
    if not _step_open:
        mark_step_begin()
    if step_end:
        now = _now()
        emit(step_end, StepEvent(_step, now, now - _step_start_ns))
    _step_open, call_hooks_due = False, True
    _step += 1


def cancel_step_begin() -> None:
    """Take back a ``mark_step_begin`` whose step never started (the fetch found the data exhausted).

    Recorders saw a ``step_begin``; the next one for the same step index replaces it."""
    global _step_open, call_hooks_due
    _step_open, call_hooks_due = False, True


def report_data_wait(wait_ns: int) -> None:
    """Record time the training thread spent blocked on the input pipeline (a wait that ended just now)."""
    if data_wait:
        emit(data_wait, DataWaitEvent(_step, int(wait_ns), _now()))


def reset_step(step: int = 0) -> None:
    """Restart step counting (a new training run in the same process); ``step_resets`` counts the restarts, so
    what is remembered per step number can tell one run's step 15 from the next run's."""
    global _step, _step_open, step_resets, call_hooks_due
    _step, _step_open, call_hooks_due = int(step), False, True
    step_resets += 1
