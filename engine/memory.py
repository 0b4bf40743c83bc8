"""The one allocator chokepoint: every buffer the engine holds is registered here, per device.

A tensor's array is registered when the tensor is created and released when the tensor dies. Views
(reshape, transpose, detach) share their base buffer: the buffer is counted once, with a reference count,
and freed when its last tensor dies. With a limit set, an op's output size is checked from shapes and dtypes
before the op computes anything (``check_room``); the limit is checked again when a result is handed to the
engine, before any tensor, graph node or gradient refers to it, so an ``OutOfMemoryError`` leaves training
state intact. NumPy's scratch space inside a single op is not counted; on CUDA the device's own limit applies
too; a ``MemoryError`` that NumPy raises inside an op becomes an ``OutOfMemoryError`` (``refused_by_system``).
Each live buffer is one ``Block`` (what register() knew: bytes, device, category, op, module, phase, step, shape,
dtype, site), read-only and never changed: readers hold blocks, not copies. The allocator reports to the engine's
recorders through ``engine.hooks.emit`` only (``buffer_alloc``, ``buffer_free``, ``buffer_history``, ``at_peak``,
``oom``; ``allocation_site`` is asked for a new buffer's site), CPU buffers and device pool blocks alike, with the
hooks' one rule: a ``PropagatingError`` goes through (the buffer is then released: its caller gets no key), any other
failure is reported once and the allocation goes on. What a memory tracker records on top lives in
``engine.memory_recording``.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

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


def _field(slot: str, doc: str) -> property:
    return property(attrgetter(slot), doc=doc)  # NOTE: a C getter: reading a field calls no Python function


class Block:
    """One live buffer as the allocator registered it. Read-only, and never changed afterwards: a tensor that claims a
    device pool block gets the allocator a new Block (its category, op, shape and dtype), so a block handed out earlier
    (``live_blocks``, ``live_set``, a peak capture) keeps saying what it said. Made by the allocator only. Beside the
    fields, the allocator counts the tensors referring to the buffer (``live_buffers``): no field of the record."""

    __slots__ = ("_buffer_id", "_bytes", "_device", "_category", "_op", "_module", "_phase", "_step", "_shape",
                 "_dtype", "_site", "_state", "_tensors")

    buffer_id = _field("_buffer_id", "the allocator's key: id() of the root array, or minus a pool block's pointer")
    bytes = _field("_bytes", "the buffer's size (a pool block's: the pool's rounded size)")
    device = _field("_device", '"cpu" or "cuda:N"')
    category = _field("_category", "what the buffer is for: one of CATEGORIES")
    op = _field("_op", "the op that allocated it")
    module = _field("_module", "the dotted path of the module it was allocated in (\"\" outside any)")
    phase = _field("_phase", "forward, backward or optimizer")
    step = _field("_step", "the step it was allocated in")
    shape = _field("_shape", "the shape of the tensor that first registered it (a pool block's: (bytes,))")
    site = _field("_site", "what the allocation_site recorder returned for it (None without one)")

    @property
    def dtype(self) -> str:
        """The dtype name of the tensor that first registered it (a pool block's: uint8)."""
        return _hooks.dtype_name(self._dtype)

    def __repr__(self) -> str:
        return (f"Block(buffer_id={self._buffer_id}, bytes={self._bytes}, device={self._device!r}, "
                f"category={self._category!r}, op={self._op!r}, module={self._module!r}, phase={self._phase!r}, "
                f"step={self._step}, shape={self._shape}, dtype={self.dtype!r})")


@dataclass(frozen=True, slots=True)
class StepPeak:
    """The highest allocated bytes since ``reset_step_peak`` and the bytes per category at that moment."""

    device: str
    bytes: int
    by_category: dict[str, int]


class _DeviceState:
    __slots__ = ("allocated", "peak", "live_tensors", "live_buffers", "limit", "categories", "step_peak", "rising",
                 "peak_categories", "ended", "peak_floor")

    def __init__(self) -> None:
        self.allocated = self.peak = self.live_tensors = self.live_buffers = self.step_peak = 0
        self.limit: int | None = None
        self.categories: dict[str, int] = {}  # category -> bytes live now
        self.rising = False  # allocated reached step_peak and nothing was freed since: categories are the peak's
        self.peak_categories: dict[str, int] = {}  # categories at step_peak, when not rising
        self.ended: tuple | None = None  # (step, allocated, peak, at peak) of the last end_step_peak(step=…)
        self.peak_floor = 0  # at_peak recorders hear of step peaks of at least this many bytes (set_peak_floor)


_cpu = _DeviceState()
_devices: dict[str, _DeviceState] = {"cpu": _cpu}
limit_set = False  # some device has a limit: ops then call check_room before computing (set_limit keeps it)
_buffers: dict[int, Block] = {}  # buffer id (id() of the root array, or minus a pool pointer) -> its Block


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
    pass to :func:`release`. ``site``: the buffer's ``Block.site`` when the caller knows it (the data pipeline
    passes the user frames that built the stage holding it); the site recorder is then not asked.
    ``check_limit=False`` counts a buffer that exists already (the pipeline's) without refusing it over the limit."""
    root = array if array.base is None else _root(array)
    key = id(root)
    block = _buffers.get(key)
    if block is not None:
        block._tensors += 1
        block._state.live_tensors += 1
        return key
    if type(array) is np.ndarray or isinstance(array, np.generic):  # (a backward may hand on a NumPy scalar)
        device = "cpu"
    else:
        device = device_of(array)
        if _pool_blocks:  # a device pool's block: the tensor claims it
            claimed = _claim(root, category, op)
            if claimed is not None:
                return claimed
    state = _cpu if device == "cpu" else _state(device)
    nbytes = root.nbytes
    if state.limit is not None and state.allocated + nbytes > state.limit and check_limit:
        raise _refused(nbytes, state, device, op)
    state.live_tensors += 1
    if not _hooks.memory_observed:
        _add(key, nbytes, device, state, category, op, array.shape, array.dtype, site)
        return key
    if site is None:  # NOTE: asked here, not in a helper: the site recorder's stack walk starts above our caller
        site, site_of = _hooks.site_scope, _hooks.allocation_site
        if site is None and site_of is not None:
            try:
                site = site_of()
            except Exception as error:  # noqa: BLE001 - recording must never break an allocation
                _hooks.report_failure(site_of, error)
    _announce_alloc(_add(key, nbytes, device, state, category, op, array.shape, array.dtype, site), release)
    return key


def _add(key: int, nbytes: int, device: str, state: _DeviceState, category: str, op: str, shape: tuple, dtype: Any,
         site: Any) -> Block:
    """Count a new buffer of ``nbytes`` for ``category`` on ``device`` (bytes, category, peaks) and keep its Block
    (module, phase and step: the hooks' now; one reference). The allocator's one way to make a Block."""
    allocated = state.allocated = state.allocated + nbytes
    categories = state.categories
    categories[category] = categories.get(category, 0) + nbytes
    if allocated > state.step_peak:
        state.step_peak = allocated
        state.rising = True
    if allocated > state.peak:
        state.peak = allocated
    state.live_buffers += 1
    block = _buffers[key] = Block()
    block._buffer_id = key
    block._bytes = nbytes
    block._device = device
    block._category = category
    block._op = op
    block._module = _hooks.module_stack[-1]
    block._phase = _hooks.phase
    block._step = _hooks._step
    block._shape = shape
    block._dtype = dtype
    block._site = site
    block._state = state  # the device's figures (the allocator's: no field)
    block._tensors = 1  # references: tensors, and a pool block's device pointer
    return block


def _announce_alloc(block: Block, undo: Any) -> None:
    """Tell the recorders of a new buffer (the allocator's one caller of ``buffer_alloc`` and ``buffer_history``
    allocations, for CPU buffers and pool blocks). A ``PropagatingError`` goes through after ``undo(key)`` released
    the buffer: the caller gets no key to release it with."""
    try:
        if _hooks.buffer_alloc:
            _hooks.emit(_hooks.buffer_alloc, block._buffer_id, block._bytes, block._device, block._category, block._op,
                        block._shape, block._dtype)
        if _hooks.buffer_history:
            _hooks.emit(_hooks.buffer_history, (_now(), "alloc", block._bytes, block._op, _hooks._step, block._device))
    except BaseException:
        undo(block._buffer_id)
        raise


def release(key: int) -> None:
    """Drop one tensor's reference to a registered buffer; the buffer is freed with its last reference (and the
    recorders told: the allocator's one caller of ``buffer_free`` and of ``buffer_history`` frees)."""
    block = _buffers.get(key)
    if block is None:
        return
    state = block._state
    state.live_tensors -= 1
    block._tensors -= 1
    if block._tensors:
        return
    if state.rising:  # the first free after a peak: the buffers live now are the peak's
        _leave_peak(state, block._device)
    del _buffers[key]
    nbytes = block._bytes
    state.allocated -= nbytes
    state.categories[block._category] -= nbytes
    state.live_buffers -= 1
    if _hooks.free_observed:
        if _hooks.buffer_free:
            _hooks.emit(_hooks.buffer_free, key, nbytes, block._device, block._category, block._op)
        if _hooks.buffer_history:
            _hooks.emit(_hooks.buffer_history, (_now(), "free", nbytes, block._op, _hooks._step, block._device))


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


def _leave_peak(state: _DeviceState, device: str) -> None:
    """The first free after a peak: keep the categories as they were at the peak and tell ``at_peak`` recorders when
    it reaches the armed floor (the buffers live now are the peak's)."""
    state.rising = False
    state.peak_categories = state.categories.copy()
    if _hooks.at_peak and state.allocated >= state.peak_floor:
        _hooks.emit(_hooks.at_peak, device, state.allocated)


def set_peak_floor(device: str, least_bytes: int) -> None:
    """``at_peak`` recorders are called for step peaks on ``device`` of at least ``least_bytes`` only (0, the
    default: every one). ``memory_recording.arm_peak_capture`` sets it to the size it waits for, so a tracker
    armed above the highest peak so far hears nothing until a new high-water mark: no call per step."""
    _state(device).peak_floor = max(0, int(least_bytes))


_now = time.perf_counter_ns


def stats(device: str = "cpu") -> MemoryStats:
    """Allocated, peak and live-tensor counts of ``device`` as the engine sees them; reserved from its pool (if any)."""
    state = _state(device)
    return MemoryStats(device, state.allocated, state.peak, reserved_bytes(device), state.live_tensors,
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
    return [(key, b._bytes, b._device, b._category, b._tensors - (key < 0)) for key, b in _copy_buffers()]


# --- what is live: the blocks register() made (read at step boundaries: no per-allocation observer) --------------

def devices() -> tuple[str, ...]:
    """The devices the allocator has accounted for ("cpu" first)."""
    return tuple(_devices)


def live_blocks(device: str | None = None) -> list[Block]:
    """Every live buffer's Block (of ``device``, or of all devices): the op, module, phase, step, shape, dtype and
    category it was allocated with. The shape and dtype are those of the tensor that first registered it."""
    return [b for b in live_set() if device is None or b._device == device]


def _copy_buffers() -> list[tuple[int, Block]]:
    """(key, block) of every live buffer (see ``_paused_copy``)."""
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


def live_set() -> tuple[Block, ...]:
    """The blocks live now, copied at C speed (one reference per buffer: blocks never change), for
    ``live_groups(record)`` or ``live_set_blocks(record, device)`` later: a leak check keeps one per step and groups
    only the steps it needs, a peak capture keeps the one at the peak."""
    return _paused_copy(tuple, _buffers.values())


def live_set_blocks(live: tuple[Block, ...], device: str) -> tuple[Block, ...]:
    """The blocks of ``device`` in a ``live_set()`` record. NOTE: a buffer freed since may have left its id to
    another buffer."""
    return tuple([b for b in live if b._device == device])


def live_groups(live: tuple[Block, ...] | None = None, sites: bool = False) -> dict[tuple, tuple[int, int]]:
    """(device, op, module, shape, dtype, category) → (live bytes, live buffers), summed over every live buffer
    (or over a ``live_set()`` record). ``sites=True``: keys are (device, site, op, module, shape, dtype,
    category), the site as ``Block.site``."""
    sums: dict[tuple, list[int]] = {}
    for b in live_set() if live is None else live:
        key = (b._device, b._site if sites else None, b._op, b._module, b._shape, b._dtype, b._category)
        group = sums.get(key)
        if group is None:
            sums[key] = [b._bytes, 1]
        else:
            group[0] += b._bytes
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
    several readers of one step boundary see the same step peak (the categories now are read at each call)."""
    state = _state(device)
    ended = state.ended
    if step is None or ended is None or ended[0] != step:
        ended = _close_step(state, step)
    return ended[1], ended[2], ended[3].copy(), state.categories.copy()


def _close_step(state: _DeviceState, step: int | None, end: bool = True) -> tuple:
    """(step, allocated, step peak, categories at the peak) of ``state``; ``end``: the step peak ends there, kept as
    ``state.ended``, and a new one starts at the bytes allocated now, rising (the categories now are its own until
    the next free copies them: no copy per step). NOTE: dicts assigned to peak_categories are never changed in place
    (each peak assigns a new one), so the figures can refer to them."""
    allocated = state.allocated
    figures = (step, allocated, state.step_peak, state.categories.copy() if state.rising else state.peak_categories)
    if end:
        state.ended = figures
        state.step_peak, state.rising = allocated, True
    return figures


def at_step_peak(device: str = "cpu") -> bool:
    """Whether ``device``'s allocated bytes are at its step peak now (nothing freed since it was reached)."""
    state = _devices.get(device)
    return state is not None and state.rising


def close_step_peaks(step: int, end: bool = True) -> list[tuple[str, int, int, dict[str, int], int]]:
    """(device, allocated bytes, step peak bytes, categories at the peak, live tensors) of every device, each
    device's step peak ended as ``end_step_peak(device, step)`` does (later calls of it for ``step`` get these
    figures). ``end=False`` reads without ending: the peak is then the highest since the last end (a reader that
    ends it only at the steps it logs gives the allocator no new rising phase, no copy of the categories, per
    step). The category dicts are shared: never change them."""
    if len(_devices) == 1:  # NOTE: the CPU alone, the usual case, written out (once per step on every tracked run)
        state = _cpu
        allocated, peak = state.allocated, state.step_peak
        at_peak = state.categories.copy() if state.rising else state.peak_categories
        if end:
            state.ended = (step, allocated, peak, at_peak)
            state.step_peak, state.rising = allocated, True
        return [("cpu", allocated, peak, at_peak, state.live_tensors)]
    return [(device, *_close_step(state, step, end)[1:4], state.live_tensors) for device, state in _devices.items()]


def buffer_count() -> int:
    """Live buffers on every device."""
    return len(_buffers)


def format_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


# --- device pools: blocks registered by a device allocator hook (engine.backend.cuda.memory) ---------------------
# A pooled device allocator (CuPy's) calls ``register_block`` for every buffer it hands out and ``release_block``
# when the buffer's pointer dies, so scratch buffers inside an op are counted too and the bytes are the pool's own
# (rounded) sizes. A tensor made from such a buffer claims its block (``register``): the block takes the tensor's
# category and op; the bytes stay counted until the pointer dies. Keys are negative pointers: never an ``id()``.
# NOTE: the device pointer holds one of the block's references, so a tensor's ``release`` never frees a pool block
# and ``release`` needs no test for it; the tensor references of ``live_buffers`` leave that one out.

_pool_blocks: set[int] = set()  # keys of blocks registered by a pool hook
_pool_readers: dict[str, Any] = {}  # device -> callable returning that device's PoolStats
_POOL_DTYPE = np.dtype(np.uint8)  # a pool block's until a tensor claims it


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A pooled device allocator's figures: bytes handed out (``allocated``), bytes held from the device
    (``reserved``), the highest allocated, the limit, and the free chunks the pool holds (``free_chunk_bytes``);
    ``fragmentation_bytes``: free bytes in chunks smaller than ``request_bytes`` (the last request's size): held,
    yet of no use to a request of that size. ``free_chunk_bytes`` is None when the pool does not expose them."""

    device: str
    allocated_bytes: int
    reserved_bytes: int
    peak_bytes: int
    limit_bytes: int | None
    request_bytes: int
    free_chunk_bytes: tuple[int, ...] | None
    fragmentation_bytes: int | None
    largest_free_block: int | None
    growth: bool


def register_block(pointer: int, nbytes: int, device: str, category: str = "temporary", op: str = "") -> int:
    """Account for a device buffer of ``nbytes`` at ``pointer`` handed out by a pool hook (the limit was checked by
    ``check_device_room``); returns the key for ``release_block``. Recorders hear of it as of a CPU buffer (no site
    is asked: the pool is called from inside the op)."""
    key = -pointer
    block = _add(key, nbytes, device, _state(device), category, op, (nbytes,), _POOL_DTYPE, None)
    _pool_blocks.add(key)
    if _hooks.memory_observed:
        _announce_alloc(block, release_block)
    return key


def release_block(key: int) -> None:
    """The device pointer of a pool block died: its bytes go back to the pool."""
    block = _buffers.get(key)
    if block is None or key not in _pool_blocks:
        return
    _pool_blocks.discard(key)
    # the tensors still referring to it are gone from the count (their release finds no block); release takes one
    # tensor off as it drops the last reference: the pointer's, which is no tensor
    block._state.live_tensors -= block._tensors - 2
    block._tensors = 1
    release(key)


def _claim(root: Any, category: str, op: str) -> int | None:
    """A tensor takes the pool block holding ``root`` (None when no pool hook registered it). The first tensor of a
    block names it: the block is made again under the tensor's category, op, shape and dtype (the one handed out
    before keeps its fields); its bytes stay counted."""
    try:
        key = -root.data.mem.ptr
    except AttributeError:
        return None
    block = _buffers.get(key)
    if block is None or key not in _pool_blocks:
        return None
    state = block._state
    if block._tensors == 1:  # only the pointer's reference
        nbytes = block._bytes
        state.allocated -= nbytes
        state.categories[block._category] -= nbytes
        state.live_buffers -= 1
        block = _add(key, nbytes, block._device, state, category, op, root.shape, root.dtype, block._site)
    block._tensors += 1
    state.live_tensors += 1
    return key


def check_device_room(device: str, nbytes: int, op: str = "") -> None:
    """Raise ``OutOfMemoryError`` (after the ``oom`` hook) if ``nbytes`` more on ``device`` would pass its limit:
    the pool hook's check of each request, before the pool is asked."""
    state = _state(device)
    if state.limit is not None and state.allocated + nbytes > state.limit:
        raise _refused(nbytes, state, device, op)


def refused_by_device(nbytes: int, device: str, reason: str, op: str = "") -> OutOfMemoryError:
    """The ``OutOfMemoryError`` for a request the device itself refused (``cudaErrorMemoryAllocation``, the pool's
    own out-of-memory error), after the ``oom`` hook."""
    return _refused(nbytes, _state(device), device, op, reason)


def attach_pool(device: str, read_stats: Any) -> None:
    """Make ``read_stats()`` (→ ``PoolStats``) the pool figures of ``device`` (``pool_stats``, ``stats``)."""
    _pool_readers[device] = read_stats


def detach_pool(device: str) -> None:
    _pool_readers.pop(device, None)


def pool_stats(device: str) -> PoolStats | None:
    """The pooled allocator's figures of ``device``; None when it has no pool (the CPU)."""
    read = _pool_readers.get(device)
    return None if read is None else read()


def reserved_bytes(device: str = "cpu") -> int:
    """Bytes held from ``device``: its pool's reserved bytes, else the allocated bytes (no pool)."""
    read = _pool_readers.get(device)
    return read().reserved_bytes if read is not None else allocated_bytes(device)
