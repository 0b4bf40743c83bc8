"""The one allocator chokepoint: every buffer the engine holds is registered here, per device.

A tensor's array is registered when the tensor is created and released when the tensor dies. Views
(reshape, transpose, detach) share their base buffer: the buffer is counted once, with a reference count,
and freed when its last tensor dies. With a limit set, an op's output size is checked from shapes and dtypes
before the op computes anything (``check_room``); the limit is checked again when a result is handed to the
engine, before any tensor, graph node or gradient refers to it, so an ``OutOfMemoryError`` leaves training
state intact. NumPy's scratch space inside a single op is not counted; on CUDA the device's own limit applies
too; a ``MemoryError`` that NumPy raises inside an op becomes an ``OutOfMemoryError`` (``refused_by_system``).
"""
from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from engine import hooks as _hooks
from engine.backend import device_of


class OutOfMemoryError(MemoryError):
    """Raised when an allocation would exceed the device's limit (nothing has been changed yet), or when the system
    refused memory inside an op (``reason``: NumPy's message; ``limit_bytes`` None when no limit is set)."""

    def __init__(self, requested_bytes: int, allocated_bytes: int, limit_bytes: int | None, device: str, op: str,
                 module: str, reason: str = "") -> None:
        self.requested_bytes, self.allocated_bytes, self.limit_bytes = requested_bytes, allocated_bytes, limit_bytes
        self.device, self.op, self.module, self.reason = device, op, module, reason
        where = f"op '{op}'" if op else "a tensor"
        if module:
            where += f" in module '{module}'"
        limit = "no limit set" if limit_bytes is None else \
            f"a limit of {format_bytes(limit_bytes)} ({limit_bytes} bytes)"
        super().__init__(
            f"out of memory on {device}: {where} requested {format_bytes(requested_bytes)} "
            f"({requested_bytes} bytes) with {format_bytes(allocated_bytes)} ({allocated_bytes} bytes) in use "
            f"and {limit}" + (f"; the system refused it: {reason}" if reason else ""))


@dataclass(frozen=True, slots=True)
class MemoryStats:
    device: str
    allocated_bytes: int
    peak_bytes: int
    reserved_bytes: int
    live_tensors: int
    live_buffers: int
    limit_bytes: int | None


class LiveBlock(NamedTuple):
    """One live buffer with what the allocator knew when it was registered (``live_blocks``)."""

    buffer_id: int
    bytes: int
    device: str
    category: str
    op: str
    module: str
    phase: str
    step: int
    shape: tuple[int, ...]
    dtype: str
    tensors: int  # tensor references (views share their base buffer)
    site: Any = None  # what the site recorder returned at register() (None without one: ``add_site_recorder``)


@dataclass(frozen=True, slots=True)
class StepPeak:
    """The highest allocated bytes since ``reset_step_peak`` and the bytes per category at that moment."""

    device: str
    bytes: int
    by_category: dict[str, int]


@dataclass(frozen=True, slots=True)
class PeakCapture:
    """The live blocks at a peak of at least the armed size (``arm_peak_capture``)."""

    device: str
    step: int
    bytes: int
    blocks: tuple[LiveBlock, ...]


class _DeviceState:
    __slots__ = ("allocated", "peak", "live_tensors", "live_buffers", "limit", "categories", "step_peak", "rising",
                 "peak_categories", "capture_bytes", "captured", "ended", "taken")

    def __init__(self) -> None:
        self.allocated = self.peak = self.live_tensors = self.live_buffers = self.step_peak = 0
        self.limit: int | None = None
        self.categories: dict[str, int] = {}  # category -> bytes live now
        self.rising = False  # allocated reached step_peak and nothing was freed since: categories are the peak's
        self.peak_categories: dict[str, int] = {}  # categories at step_peak, when not rising
        self.capture_bytes: int | None = None  # arm_peak_capture: copy the live buffers at a peak >= this
        self.captured: tuple[int, int, dict[int, list]] | None = None  # (step, bytes, copy of _buffers)
        self.ended: tuple | None = None  # (step, allocated, peak, at peak, now) of the last end_step_peak(step=…)
        self.taken: tuple | None = None  # (step, hooks.step_resets, capture) of the last take_peak_capture(step=…)


_devices: dict[str, _DeviceState] = {"cpu": _DeviceState()}
limit_set = False  # some device has a limit: ops then call check_room before computing (set_limit keeps it)
# id(root buffer) -> [bytes, tensor references, device state, device name, category, op, module, phase, step, shape,
#                     dtype, site]: what register() knew; nothing after the references changes.
_buffers: dict[int, list] = {}
# Optional per-allocation recording, installed by a memory tracker (None: nothing is called or appended).
_site_recorder: Callable[[], Any] | None = None  # the first of _site_recorders
_site_recorders: list[Callable[[], Any]] = []
_history_append: Callable[[tuple], None] | None = None  # appends to every ring of _history_rings
_history_rings: list[Any] = []
_failed_recorders: list[Any] = []  # site recorders and step logs whose failure was reported; forgotten on removal
_step_logs: list[StepLog] = []  # add_step_log
_last_live: tuple = (None, ())  # (live buffer count and bytes per device, live_set()) at the last step end taking one


def _state(device: str) -> _DeviceState:
    state = _devices.get(device)
    if state is None:
        state = _devices[device] = _DeviceState()
    return state


def _root(array: Any) -> Any:
    base = array.base
    while base is not None and hasattr(base, "nbytes") and hasattr(base, "base"):
        array, base = base, base.base
    return array


# What ``register`` is told a buffer is for (the logs carry them: instrumentation/format/memory_categories.py).
CATEGORIES = ("parameter", "gradient", "optimizer_state", "activation", "temporary", "input")


def register(array: Any, category: str = "activation", op: str = "", site: Any = None,
             check_limit: bool = True) -> int:
    """Account for ``array`` (held by a new tensor) under ``category`` (one of ``CATEGORIES``); returns the key to
    pass to :func:`release`. ``site``: the buffer's ``LiveBlock.site`` when the caller knows it (the data pipeline
    passes the user frames that built the stage holding it); the site recorder is then not asked.
    ``check_limit=False`` counts a buffer that exists already (the pipeline's) without refusing it over the limit."""
    root = array if array.base is None else _root(array)
    key = id(root)
    entry = _buffers.get(key)
    if entry is not None:
        entry[1] += 1
        entry[2].live_tensors += 1
        return key
    device = "cpu" if type(array) is np.ndarray else device_of(array)
    state = _devices["cpu"] if device == "cpu" else _state(device)
    nbytes = root.nbytes
    allocated = state.allocated + nbytes
    if state.limit is not None and allocated > state.limit and check_limit:
        raise _refused(nbytes, state, device, op)
    state.allocated = allocated
    categories = state.categories
    categories[category] = categories.get(category, 0) + nbytes
    if allocated > state.step_peak:
        state.step_peak = allocated
        state.rising = True
    if allocated > state.peak:
        state.peak = allocated
    state.live_tensors += 1
    state.live_buffers += 1
    module, phase, step, shape, dtype = _hooks.module_stack[-1], _hooks.phase, _hooks._step, array.shape, array.dtype
    if site is None and _site_recorder is not None:
        site = _hooks.site_scope
        if site is None:
            try:
                site = _site_recorder()
            except Exception as error:  # noqa: BLE001 - recording must never break an allocation
                _recorder_failed(_site_recorder, error)
    _buffers[key] = [nbytes, 1, state, device, category, op, module, phase, step, shape, dtype, site]
    if _history_append is not None:
        _history_append((_perf_counter_ns(), "alloc", nbytes, op, step, device))
    if _hooks.alloc:  # NOTE: the event is built here, not in a helper: one call less per allocation
        _hooks.emit(_hooks.alloc, _new_tuple(_MemoryEvent, (
            "alloc", nbytes, device, key, category, op, module, phase, step,
            shape if shape.__class__ is tuple else tuple(shape), _dtype_names.get(dtype) or _hooks.dtype_name(dtype),
            _perf_counter_ns())))
    return key


def check_room(nbytes: int, like: Any, op: str) -> None:
    """Raise ``OutOfMemoryError`` (after the ``oom`` hook) if ``nbytes`` more on the device of array ``like`` would
    exceed its limit: an op's output, checked from shapes and dtypes before the op allocates anything."""
    device = "cpu" if type(like) is np.ndarray else device_of(like)
    state = _devices.get(device)
    if state is not None and state.limit is not None and state.allocated + nbytes > state.limit:
        raise _refused(nbytes, state, device, op)


def refused_by_system(error: MemoryError, op: str, like: Any, expected_bytes: int | None = None) -> MemoryError:
    """The ``OutOfMemoryError`` for a ``MemoryError`` raised inside ``op`` (NumPy could not allocate), with the
    fields of the limit's: the bytes NumPy asked for (else ``expected_bytes``, else 0), the bytes in use and the
    limit of the device of array ``like``; the ``oom`` hook is emitted first. An ``OutOfMemoryError`` is returned
    as it is."""
    if isinstance(error, OutOfMemoryError):
        return error
    requested = getattr(error, "_total_size", None)  # NOTE: numpy's _ArrayMemoryError ("Unable to allocate ...")
    if not isinstance(requested, int):
        requested = expected_bytes or 0
    device = "cpu" if like is None or type(like) is np.ndarray else device_of(like)
    refused = _refused(requested, _state(device), device, op, str(error) or type(error).__name__)
    refused.__cause__ = error
    return refused


def _refused(nbytes: int, state: _DeviceState, device: str, op: str, reason: str = "") -> OutOfMemoryError:
    """The error for a refused allocation, after announcing it to the ``oom`` observers."""
    module = _hooks.module_stack[-1]
    if _hooks.oom:
        _hooks.emit(_hooks.oom, _hooks.OomEvent(nbytes, state.allocated, state.limit, device, op, module,
                                                _hooks.phase, _hooks._step, time.perf_counter_ns()))
    return OutOfMemoryError(nbytes, state.allocated, state.limit, device, op, module, reason)


def release(key: int) -> None:
    """Drop one tensor's reference to a registered buffer; the buffer is freed with its last reference."""
    entry = _buffers.get(key)
    if entry is None:
        return
    state = entry[2]
    state.live_tensors -= 1
    entry[1] -= 1
    if entry[1]:
        return
    if state.rising:  # the first free after a peak: keep the categories as they were at it
        _leave_peak(state)
    del _buffers[key]
    state.allocated -= entry[0]
    state.categories[entry[4]] -= entry[0]
    state.live_buffers -= 1
    if _history_append is not None:
        _history_append((_perf_counter_ns(), "free", entry[0], entry[5], _hooks._step, entry[3]))
    if _hooks.free:
        _hooks.emit(_hooks.free, _new_tuple(_MemoryEvent, ("free", entry[0], entry[3], key, entry[4], "",
                                                           _hooks.module_stack[-1], _hooks.phase, _hooks._step, (), "",
                                                           _perf_counter_ns())))


def _leave_peak(state: _DeviceState) -> None:
    state.rising = False
    state.peak_categories = state.categories.copy()
    if state.capture_bytes is not None and state.allocated >= state.capture_bytes:
        state.captured = (_hooks._step, state.allocated, dict(_buffers))
        state.capture_bytes = state.allocated + 1  # a higher peak later replaces it


_new_tuple = tuple.__new__  # NOTE: a NamedTuple built as tuple.__new__(cls, values) skips its Python-level __new__ (~2x)
_MemoryEvent = _hooks.MemoryEvent
_dtype_names = _hooks._dtype_names  # hooks.dtype_name's memo
_perf_counter_ns = time.perf_counter_ns


def stats(device: str = "cpu") -> MemoryStats:
    """Allocated, peak and live-tensor counts of ``device`` as the engine sees them."""
    state = _state(device)
    return MemoryStats(device, state.allocated, state.peak, state.allocated, state.live_tensors,
                       state.live_buffers, state.limit)


def set_limit(limit_bytes: int | None, device: str = "cpu") -> None:
    """Cap the bytes the engine may hold on ``device`` (None removes the cap); an int, bool excluded."""
    global limit_set
    if limit_bytes is not None and (isinstance(limit_bytes, bool) or not isinstance(limit_bytes, (int, np.integer))
                                    or limit_bytes < 0):
        raise ValueError(f"memory limit must be a non-negative number of bytes (an int) or None, got "
                         f"{limit_bytes!r} ({type(limit_bytes).__name__})")
    _state(device).limit = None if limit_bytes is None else int(limit_bytes)
    limit_set = any(state.limit is not None for state in _devices.values())


def allocated_bytes(device: str = "cpu") -> int:
    """Bytes the engine holds on ``device`` now: ``stats(device).allocated_bytes`` without building a MemoryStats
    (cheap enough to read after every op)."""
    state = _devices.get(device)
    return state.allocated if state is not None else 0


def live_tensors(device: str = "cpu") -> int:
    """Tensors alive on ``device`` now: ``stats(device).live_tensors`` without building a MemoryStats."""
    state = _devices.get(device)
    return state.live_tensors if state is not None else 0


def reset_peak(device: str = "cpu") -> None:
    state = _state(device)
    state.peak = state.allocated


def live_buffers() -> list[tuple[int, int, str, str, int]]:
    """(buffer id, bytes, device, category, tensor references) of every live buffer."""
    return [(key, e[0], e[3], e[4], e[1]) for key, e in _copy_buffers()]


# --- what is live, by the metadata register() kept (read at step boundaries: no per-allocation observer) ---------

def devices() -> tuple[str, ...]:
    """The devices the allocator has accounted for ("cpu" first)."""
    return tuple(_devices)


def _block(key: int, e: list) -> LiveBlock:
    return _new_tuple(LiveBlock, (key, e[0], e[3], e[4], e[5], e[6], e[7], e[8], tuple(e[9]), _hooks.dtype_name(e[10]),
                                  e[1], e[11]))


def live_blocks(device: str | None = None) -> list[LiveBlock]:
    """Every live buffer (of ``device``, or of all devices) with the op, module, phase, step, shape, dtype and
    category it was allocated with. The shape and dtype are those of the tensor that first registered it."""
    return [_block(key, e) for key, e in _copy_buffers() if device is None or e[3] == device]


def _copy_buffers() -> list[tuple[int, list]]:
    """(key, entry) of every live buffer (see ``_paused_copy``)."""
    return _paused_copy(list, _buffers.items())


def _paused_copy(make: Any, view: Any) -> Any:
    """``make(view)`` of a view of ``_buffers`` (``list`` or ``tuple``). NOTE: the cycle collector is paused while
    copying, so no garbage tensor dies mid-copy (its release would change ``_buffers`` under the iteration)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return make(view)
    finally:
        if enabled:
            gc.enable()


def live_set() -> tuple:
    """The buffers live now as an opaque record for ``live_groups(record)`` later: one reference per buffer,
    copied at C speed (what a group is made of never changes after register()), so a leak check can keep one per
    step and group only the steps it needs."""
    return _paused_copy(tuple, _buffers.values())


def live_groups(live: tuple | None = None, sites: bool = False) -> dict[tuple, tuple[int, int]]:
    """(device, op, module, shape, dtype, category) → (live bytes, live buffers), summed over every live buffer
    (or over a ``live_set()`` record) without building a record per buffer. ``sites=True``: keys are (device,
    site, op, module, shape, dtype, category), the site as ``LiveBlock.site``."""
    sums: dict[tuple, list[int]] = {}
    for e in live_set() if live is None else live:
        key = (e[3], e[11] if sites else None, e[5], e[6], e[9], e[10], e[4])
        group = sums.get(key)
        if group is None:
            sums[key] = [e[0], 1]
        else:
            group[0] += e[0]
            group[1] += 1
    name = _hooks.dtype_name
    if sites:
        return {(d, site, op, module, tuple(shape), name(dtype), category): (g[0], g[1])
                for (d, site, op, module, shape, dtype, category), g in sums.items()}
    return {(d, op, module, tuple(shape), name(dtype), category): (g[0], g[1])
            for (d, _, op, module, shape, dtype, category), g in sums.items()}


def category_bytes(device: str = "cpu") -> dict[str, int]:
    """Bytes live now per category on ``device`` (a category once seen stays, at 0 when nothing of it is live)."""
    state = _devices.get(device)
    return dict(state.categories) if state is not None else {}


def step_peak(device: str = "cpu") -> StepPeak:
    """The highest allocated bytes on ``device`` since the last ``reset_step_peak`` and the categories at it."""
    state = _state(device)
    categories = state.categories if state.rising else state.peak_categories
    return StepPeak(device, state.step_peak, dict(categories))


def reset_step_peak(device: str = "cpu") -> None:
    """Start a new step peak at the bytes allocated now (one consumer, at step boundaries, owns this)."""
    state = _state(device)
    state.step_peak, state.rising = state.allocated, False
    state.peak_categories = state.categories.copy()


def end_step_peak(device: str = "cpu", step: int | None = None) -> tuple[int, int, dict[str, int], dict[str, int]]:
    """(allocated bytes, step peak bytes, categories at the peak, categories now) of ``device``, then
    ``reset_step_peak``: what a reader at each step boundary takes, in one call (the dicts are its own). With
    ``step`` (the step that ended), later calls for the same step get the first call's figures and reset nothing:
    several readers of one step boundary see the same step peak."""
    state = _state(device)
    ended = state.ended
    if step is None or ended is None or ended[0] != step:
        ended = _close_step(state, step)
    return ended[1], ended[2], ended[3].copy(), ended[4].copy()


def _close_step(state: _DeviceState, step: int | None) -> tuple:
    """End ``state``'s step peak: (step, allocated, step peak, categories at the peak, categories now), kept as
    ``state.ended``; a new step peak starts at the bytes allocated now. NOTE: dicts assigned to peak_categories are
    never changed in place (each reset or peak assigns a new one), so the figures can refer to them."""
    now = state.categories.copy()
    ended = state.ended = (step, state.allocated, state.step_peak, now if state.rising else state.peak_categories, now)
    state.peak_categories, state.step_peak, state.rising = now, state.allocated, False
    return ended


def arm_peak_capture(device: str, min_bytes: int | None) -> None:
    """Keep a copy of the live buffers at the next peak of at least ``min_bytes`` on ``device`` (the first free
    after it, or ``take_peak_capture`` while still at it); a higher peak later replaces it. None disarms. Costs
    nothing per allocation: the copy is made once per peak that qualifies."""
    if min_bytes is not None and (not isinstance(min_bytes, (int, np.integer)) or min_bytes < 0):
        raise ValueError(f"peak capture size must be a non-negative number of bytes or None, got {min_bytes!r}")
    state = _state(device)
    state.capture_bytes = None if min_bytes is None else int(min_bytes)


def take_peak_capture(device: str = "cpu", step: int | None = None) -> PeakCapture | None:
    """The capture armed by ``arm_peak_capture`` (None if no qualifying peak happened); clears it. With ``step`` (the
    step that ended), later calls for the same step get the same answer (several readers of one step boundary); a
    step number counted again after ``hooks.reset_step`` is a new step."""
    state = _state(device)
    taken = state.taken
    if step is not None and taken is not None and taken[0] == step and taken[1] == _hooks.step_resets:
        return taken[2]
    capture = _take_capture(state, device)
    if step is not None:
        state.taken = (step, _hooks.step_resets, capture)
    return capture


def _take_capture(state: _DeviceState, device: str) -> PeakCapture | None:
    if state.rising and state.capture_bytes is not None and state.allocated >= state.capture_bytes:
        state.captured = (_hooks._step, state.allocated, dict(_buffers))
        state.capture_bytes = state.allocated + 1
    captured, state.captured = state.captured, None
    if captured is None:
        return None
    step, nbytes, buffers = captured
    return PeakCapture(device, step, nbytes, tuple(_block(k, e) for k, e in buffers.items() if e[3] == device))


# --- optional per-allocation recording (a memory tracker's stacks and history; nothing runs while none is set) ---

def enter_site_scope() -> Any:
    """At the entry of an engine call that runs no user code while it allocates (``backward()``): ask the site
    recorder once, here, for the site every allocation of the call gets (the caller's line, as each allocation's
    own stack walk would find it). Returns what ``exit_site_scope`` restores. Engine code that calls user code
    inside the scope (a user-defined op's backward, observers through ``hooks.emit``) clears ``hooks.site_scope``
    for that call."""
    previous = _hooks.site_scope
    if _site_recorder is None or previous is not None:
        return previous
    try:
        _hooks.site_scope = _site_recorder()
    except Exception as error:  # noqa: BLE001 - recording must never break the computation
        _recorder_failed(_site_recorder, error)
    return previous


def exit_site_scope(previous: Any) -> None:
    _hooks.site_scope = previous


def add_site_recorder(recorder: Callable[[], Any]) -> None:
    """Call ``recorder()`` in every ``register`` of a new buffer and keep what it returns as the buffer's
    ``LiveBlock.site`` (e.g. an interned allocation stack). Several may be added; the first one added (and not
    removed) is the one called. A recorder that raises is reported once on stderr; the site is then None."""
    _site_recorders.append(recorder)
    _refresh_recording()


def remove_site_recorder(recorder: Callable[[], Any]) -> None:
    """Stop calling ``recorder`` (unknown ones are ignored); the next one added, if any, takes over."""
    _site_recorders[:] = [r for r in _site_recorders if r is not recorder]
    _forget_failure(recorder)
    _refresh_recording()


def add_history_ring(ring: Any) -> None:
    """Append one flat tuple per allocation and per free to ``ring`` (e.g. a ``deque(maxlen=n)``):
    ``(time_ns, "alloc" | "free", bytes, op, step, device)``, the op being the buffer's (the one it was allocated
    by) and the step the step at that moment. Rings are independent; each sees every allocation and free."""
    _history_rings.append(ring)
    _refresh_recording()


def remove_history_ring(ring: Any) -> None:
    """Stop appending to ``ring`` (unknown ones are ignored)."""
    _history_rings[:] = [r for r in _history_rings if r is not ring]
    _refresh_recording()


class StepLog:
    """A reader of the step ends (``add_step_log``). At every ``hooks.mark_step_end``, before observers get
    ``step_end``, the allocator appends to ``records`` one tuple per device it accounts for — ``(step, wall time s,
    device, allocated bytes, step peak bytes, bytes per category at the peak, live tensors)`` — and resets the step
    peak (``end_step_peak(device, step)`` then returns the same figures). With ``live`` (e.g. a ``deque(maxlen=n)``)
    it also appends ``(step, live_set())`` there, the previous record again while the live buffer count and every
    device's bytes are those of the previous step end (nothing allocated or freed on balance). Every
    ``batch_steps`` steps, or when the first record waiting is ``batch_s`` seconds old, it calls ``on_batch()``,
    which should ``take()`` the records; one that raises is reported once on stderr. The category dicts are
    shared between readers: never change them."""

    __slots__ = ("records", "steps", "live", "on_batch", "batch_steps", "batch_s")

    def __init__(self, on_batch: Callable[[], None], batch_steps: int = 16, batch_s: float = 0.5,
                 live: Any = None) -> None:
        if batch_steps < 1 or not batch_s >= 0:
            raise ValueError(f"batch_steps must be >= 1 and batch_s >= 0, got {batch_steps} and {batch_s}")
        self.records: list[tuple] = []
        self.steps = 0  # step ends in records
        self.live, self.on_batch, self.batch_steps, self.batch_s = live, on_batch, batch_steps, batch_s

    def take(self) -> list[tuple]:
        """The records appended since the last ``take``, oldest first."""
        records, self.records, self.steps = self.records, [], 0
        return records


def add_step_log(log: StepLog) -> None:
    """Append ``log``'s records at every step end from now on (several logs get the same records)."""
    global _last_live
    _last_live = (None, ())  # NOTE: a record taken long ago could match by count and bytes alone
    _step_logs.append(log)
    _hooks.step_recorder = _end_step


def remove_step_log(log: StepLog) -> None:
    """Stop appending to ``log`` (unknown ones are ignored); what it holds stays there."""
    _step_logs[:] = [known for known in _step_logs if known is not log]
    _forget_failure(log)
    if not _step_logs:
        _hooks.step_recorder = None


def _end_step(step: int) -> None:
    """``hooks.mark_step_end``'s call while step logs are installed: one pass for every log."""
    global _last_live
    wall_time, signature, records = time.time(), (len(_buffers),), []
    for device, state in _devices.items():
        _, allocated, peak, at_peak, _ = _close_step(state, step)
        records.append((step, wall_time, device, allocated, peak, at_peak, state.live_tensors))
        signature += (allocated,)
    for log in _step_logs:
        log.records += records
        log.steps += 1
        if log.live is not None:
            if signature != _last_live[0]:
                _last_live = (signature, live_set())
            log.live.append((step, _last_live[1]))
        if log.steps >= log.batch_steps or wall_time - log.records[0][1] >= log.batch_s:
            try:
                log.on_batch()
            except Exception as error:  # noqa: BLE001 - a reader must never break the training step
                _recorder_failed(log, error, "step log reader", "its records are kept", log.on_batch)


def _recorder_failed(recorder: Any, error: Exception, what: str = "site recorder",
                     outcome: str = "the buffer's site is None", called: Any = None) -> None:
    """Report ``recorder``'s first failure on stderr (``called``: what failed, if not ``recorder`` itself). Kept by
    the object, not its ``id()`` (a later object may get the id once this one is gone) until its removal forgets it."""
    if not any(known is recorder for known in _failed_recorders):
        _failed_recorders.append(recorder)
        print(f"engine.memory: {what} {recorder if called is None else called!r} failed ({type(error).__name__}: "
              f"{error}); {outcome}; further failures are not reported", file=sys.stderr)


def _forget_failure(recorder: Any) -> None:
    _failed_recorders[:] = [known for known in _failed_recorders if known is not recorder]


def _refresh_recording() -> None:
    global _site_recorder, _history_append
    _site_recorder = _site_recorders[0] if _site_recorders else None
    appends = tuple(ring.append for ring in _history_rings)
    if len(appends) <= 1:
        _history_append = appends[0] if appends else None
        return

    def fan_out(item: tuple) -> None:
        for append in appends:
            append(item)

    _history_append = fan_out


def format_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"
