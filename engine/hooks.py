"""Hook points of the engine: ops, allocations, steps and input waits; near-zero cost when nobody listens.

An observer is any object with a subset of the methods ``op_start(OpEvent)``, ``op_end(OpEvent)``,
``alloc(MemoryEvent)``, ``free(MemoryEvent)``, ``oom(OomEvent)``, ``step_begin(StepEvent)``,
``step_end(StepEvent)``, ``data_wait(DataWaitEvent)``, ``module_begin(ModuleEvent)``,
``module_end(ModuleEvent)``, ``optimizer_step_begin(OptimizerEvent)`` and ``optimizer_step_end(OptimizerEvent)``.
The engine checks a plain list per hook point (per op: the one flag ``ops_observed``), so with no observer the
cost is one attribute load and a truth test. A profiler can instead install an ``engine.op_log.OpLog``
(``set_op_log``): the engine then appends a few ints per op to it, with no event object and no call; a numerics
check can install ``set_output_check(check)``: one call per op with its input and output arrays, no event. An exception raised by an observer is reported once (per observer and hook point) on stderr and
the observer keeps receiving later events: observing must never break training. The one exception is a
``PropagatingError`` (e.g. ``engine.NonFiniteError``), which an observer raises on purpose to stop the
computation. Hook state is process-global and meant for the training thread.
"""
from __future__ import annotations

import sys
import time
from typing import Any, NamedTuple

HOOK_POINTS = ("op_start", "op_end", "alloc", "free", "oom", "step_begin", "step_end", "data_wait", "module_begin",
               "module_end", "optimizer_step_begin", "optimizer_step_end")

# Per hook point: the bound methods of the subscribed observers. The engine tests these lists directly.
op_start: list = []
op_end: list = []
alloc: list = []
free: list = []
step_begin: list = []
step_end: list = []
data_wait: list = []
oom: list = []
module_begin: list = []
module_end: list = []
optimizer_step_begin: list = []
optimizer_step_end: list = []

# The profiler's fast path (engine.op_log.OpLog): while set, the engine appends every op to it directly.
op_log: Any = None
# check_numerics's fast path: while set, the engine calls output_check(op, module, inputs, outputs) after every op
# (forward and backward), with no event object. It may raise a PropagatingError; any other error is reported once.
output_check: Any = None
# op_start or op_end or op_log or output_check: the one flag Function.__call__ tests per op (kept by subscribe,
# unsubscribe, set_op_log and set_output_check).
ops_observed: bool = False

# The allocation site shared by every allocation of the engine call running now (``engine.memory.site_scope``):
# while set, the allocator records it instead of asking its site recorder to walk the stack. None outside.
site_scope: Any = None

# engine.memory's step end (``memory.add_step_log``): while set, mark_step_end calls it with the ending step before
# observers get ``step_end``.
step_recorder: Any = None

_observers: list[Any] = []
_owners: dict[int, tuple[Any, str]] = {}  # id(subscribed method) -> (observer, hook point)
_reported: set[tuple[int, str]] = set()

# Where the training thread is: module path stack (the sentinel "" is the top level), phase and step.
module_stack: list[str] = [""]
phase: str = "forward"
_step: int = 0
_step_open: bool = False
step_resets: int = 0  # reset_step calls so far
_step_start_ns: int = 0


class OpEvent(NamedTuple):
    """One op execution. ``outputs`` and ``output_bytes`` are empty/0 in ``op_start``."""

    op: str
    phase: str
    module: str
    step: int
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...] = ()
    output_bytes: int = 0
    time_ns: int = 0


class MemoryEvent(NamedTuple):
    """An allocation or a free seen by the allocator chokepoint (``engine.memory``)."""

    action: str  # "alloc" | "free"
    bytes: int
    device: str
    buffer_id: int
    category: str  # parameter | gradient | optimizer_state | activation | temporary | input
    op: str
    module: str
    phase: str
    step: int
    shape: tuple[int, ...]
    dtype: str
    time_ns: int


class OomEvent(NamedTuple):
    """An allocation the allocator refused; emitted before ``OutOfMemoryError`` is raised (it still is). The limit
    is None when NumPy itself could not allocate inside an op with no limit set."""

    requested_bytes: int
    allocated_bytes: int
    limit_bytes: int | None
    device: str
    op: str
    module: str
    phase: str
    step: int
    time_ns: int


class ModuleEvent(NamedTuple):
    """A ``Module.__call__`` entered (``module_begin``) or left (``module_end``); ``path`` is its dotted name."""

    path: str
    module_type: str
    step: int
    time_ns: int


class OptimizerEvent(NamedTuple):
    """Around the parameter updates of one ``optimizer.step()`` (before ``step_end``)."""

    optimizer: Any
    step: int
    time_ns: int


class PropagatingError(Exception):
    """Base of errors an observer raises on purpose to stop the computation; hooks let these through."""


class StepEvent(NamedTuple):
    step: int
    time_ns: int
    duration_ns: int = 0  # step_end only: time since the matching step_begin


class DataWaitEvent(NamedTuple):
    step: int
    wait_ns: int
    time_ns: int


def subscribe(observer: Any) -> Any:
    """Attach ``observer`` to every hook point it has a method for; returns the observer (the handle)."""
    if any(o is observer for o in _observers):
        return observer
    methods = [(name, getattr(observer, name, None)) for name in HOOK_POINTS]
    if not any(callable(m) for _, m in methods):
        raise TypeError(f"{type(observer).__name__} has none of the hook methods {', '.join(HOOK_POINTS)}")
    _observers.append(observer)
    for name, method in methods:
        if callable(method):
            _owners[id(method)] = (observer, name)
            globals()[name].append(method)
    _refresh_ops_observed()
    return observer


def unsubscribe(observer: Any) -> None:
    """Detach ``observer`` from every hook point; unknown observers are ignored."""
    kept = [o for o in _observers if o is not observer]
    if len(kept) == len(_observers):
        return
    _observers[:] = kept
    removed = []
    for name in HOOK_POINTS:  # NOTE: one callable may serve several hook points (alloc = free = record)
        points = globals()[name]
        remaining = []
        for hook in points:
            (removed if _owners.get(id(hook), (None,))[0] is observer else remaining).append(hook)
        points[:] = remaining
    for hook in removed:
        _owners.pop(id(hook), None)
    # NOTE: failures are keyed by id(observer); forget them, or a later observer reusing the id is never reported.
    _reported.difference_update([key for key in _reported if key[0] == id(observer)])
    _refresh_ops_observed()


def set_op_log(log: Any) -> Any:
    """Install ``log`` (an ``engine.op_log.OpLog``, or None to remove it) as the op log; returns the previous one."""
    global op_log
    previous, op_log = op_log, log
    _refresh_ops_observed()
    return previous


def set_output_check(check: Any) -> Any:
    """Install ``check(op, module, inputs, outputs)`` (or None to remove it), called after every op with the op's
    input and output arrays (an output may be None: a backward op's gradient for an input that needs none);
    returns the previous one. The phase and step are ``phase`` and ``current_step()`` at that moment."""
    global output_check
    if check is not None and not callable(check):
        raise TypeError(f"set_output_check needs a callable or None, got {type(check).__name__}")
    previous, output_check = output_check, check
    _refresh_ops_observed()
    return previous


def run_output_check(check: Any, op: str, module: str, inputs: Any, outputs: Any) -> None:
    """``check(...)`` as the engine calls it: a PropagatingError goes through, any other error is reported once."""
    try:
        check(op, module, inputs, outputs)
    except PropagatingError:
        raise
    except Exception as error:  # noqa: BLE001 - observing must never break training
        _report_failure(check, error)


def _refresh_ops_observed() -> None:
    global ops_observed
    ops_observed = bool(op_start or op_end or op_log is not None or output_check is not None)


def observers() -> tuple[Any, ...]:
    return tuple(_observers)


def _report_failure(hook: Any, error: Exception) -> None:
    """Say once per observer and hook point that an observer failed; the event is skipped for it."""
    observer, name = _owners.get(id(hook), (hook, getattr(hook, "__name__", "?")))
    key = (id(observer), name)
    if key not in _reported:
        _reported.add(key)
        print(f"engine.hooks: observer {type(observer).__name__}.{name} failed and is skipped for this event "
              f"({type(error).__name__}: {error}); further failures are not reported", file=sys.stderr)


_dtype_names: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """``str(dtype)``, memoized: NumPy computes dtype names in Python (about 4 us each), once per op input."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype)
    return name


def emit(points: list, event: Any) -> None:
    """Call every subscribed method of a hook point (the lists hold the bound methods themselves: one call each)."""
    if site_scope is not None:  # an observer is code of its own: what it allocates is not the engine call's
        _emit_outside_site_scope(points, event)
        return
    for hook in points:
        try:
            hook(event)
        except PropagatingError:
            raise
        except Exception as error:  # noqa: BLE001 - observing must never break training
            _report_failure(hook, error)


def _emit_outside_site_scope(points: list, event: Any) -> None:
    global site_scope
    scope, site_scope = site_scope, None
    try:
        emit(points, event)
    finally:
        site_scope = scope


# --- where the training thread is -------------------------------------------------------------------

def current_step() -> int:
    """The index of the training step in progress (0 before the first ``optimizer.step()``)."""
    return _step


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
    """Open the current step if it is not open yet (the data pipeline and ``fit`` call this)."""
    global _step_open, _step_start_ns
    if _step_open:
        return
    _step_open = True
    _step_start_ns = time.perf_counter_ns()
    if step_begin:
        emit(step_begin, tuple.__new__(StepEvent, (_step, _step_start_ns, 0)))


def mark_step_end() -> None:
    """Close the current step (``optimizer.step()`` calls this) and advance the step counter.

    An installed op log gets the step's ``STEP_END`` record (``engine.op_log``) and the allocator's step logs their
    records (``engine.memory.add_step_log``) before observers get ``step_end``."""
    global _step_open, _step
    if not _step_open:
        mark_step_begin()
    now = time.perf_counter_ns()
    log = op_log
    if log is not None:
        log.extend((log.STEP_END, _step, _step_start_ns, now, 0, 0))
    if step_recorder is not None:
        step_recorder(_step)
    if step_end:
        emit(step_end, tuple.__new__(StepEvent, (_step, now, now - _step_start_ns)))
    _step_open = False
    _step += 1


def cancel_step_begin() -> None:
    """Take back a ``mark_step_begin`` whose step never started (the fetch found the data exhausted).

    Observers saw a ``step_begin``; the next one for the same step index replaces it."""
    global _step_open
    _step_open = False


def report_data_wait(wait_ns: int) -> None:
    """Record time the training thread spent blocked on the input pipeline (a wait that ended just now).

    An installed op log gets a ``DATA_WAIT`` record (``engine.op_log``); observers get ``data_wait``."""
    log = op_log
    if log is None and not data_wait:
        return
    wait_ns, now = int(wait_ns), time.perf_counter_ns()
    if log is not None:
        log.extend((log.DATA_WAIT, _step, now - wait_ns, now, 0, 0))
    if data_wait:
        emit(data_wait, DataWaitEvent(_step, wait_ns, now))


def reset_step(step: int = 0) -> None:
    """Restart step counting (a new training run in the same process); ``step_resets`` counts the restarts, so
    what is remembered per step number can tell one run's step 15 from the next run's."""
    global _step, _step_open, step_resets
    _step, _step_open = int(step), False
    step_resets += 1
