"""What a memory tracker records beside the allocator, as recorders: sites, an alloc/free history, step logs, peaks.

The allocator (``engine.memory``) only counts and keeps each live buffer's metadata; these recorders, added with
``engine.hooks.add_recorder``, are what a tracker asks for on top:

- ``SiteRecorder(capture)``: ``capture()`` runs in every ``register`` of a new buffer (or once per ``backward()``,
  ``hooks.enter_site_scope``) and what it returns is the buffer's ``Block.site`` (e.g. an interned stack).
- ``HistoryRing(ring)``: appends ``(time_ns, "alloc" | "free", bytes, op, step, device)`` to ``ring`` (e.g. a
  ``deque(maxlen=n)``) per allocation and free, the op being the buffer's (the one it was allocated by); the
  allocator calls the ring's ``append`` itself (``buffer_history``).
- ``StepLog(on_batch, …)``: the figures of every step end, batched (see the class).
- ``arm_peak_capture`` / ``take_peak_capture``: a copy of the live buffers at the highest peak (a recorder of the
  allocator's ``at_peak`` while some device is armed).
"""
from __future__ import annotations

import operator
import time
from dataclasses import dataclass
from typing import Any, Callable

from engine import hooks as _hooks
from engine import memory as _memory



class SiteRecorder:
    """A recorder whose ``allocation_site`` is ``capture`` itself (no call in between; only the first recorder
    with an ``allocation_site`` is asked). A capture that raises is reported once; the site is then None."""

    __slots__ = ("allocation_site",)

    def __init__(self, capture: Callable[[], Any]) -> None:
        self.allocation_site = capture


class HistoryRing:
    """A recorder appending one flat tuple per allocation and per free to ``ring`` (see the module docstring): its
    ``buffer_history`` is the ring's own ``append`` (a deque's is C: no Python frame per allocation)."""

    __slots__ = ("ring", "buffer_history")

    def __init__(self, ring: Any) -> None:
        self.ring, self.buffer_history = ring, ring.append


class StepLog:
    """A recorder of the step ends. At every ``hooks.mark_step_end`` (before recorders of order 0) it keeps the step's
    figures: per device the allocator accounts for, ``(device, allocated bytes, step peak bytes, bytes per category
    at the peak, live tensors)`` — and ends the step peak (``memory.end_step_peak(device, step)`` then returns the
    same figures; several logs get the same figures). ``take()`` hands them over as one tuple per device and step,
    ``(step, wall time s, device, allocated bytes, step peak bytes, bytes per category at the peak, live tensors)``;
    ``take_steps()`` as one ``(step, wall time s, [figures per device])`` per step end (the tracker's way; the step
    end keeps its clock reading, the wall time is worked out at the take). With ``live`` (e.g. a
    ``deque(maxlen=n)``) it also appends ``(step, memory.live_set())`` there, the previous record again when the
    previous kept step end was ``every`` steps before with the same live buffer count and bytes on every device
    (nothing allocated or freed on balance). Every ``batch_steps`` step ends kept, or when the first one waiting is
    ``batch_s`` seconds old, it calls ``on_batch()``, which should take the figures; one that raises is reported once
    on stderr and the figures are kept. The category dicts are shared between readers: never change them.

    ``peak_every``: the step peak ends only at the step ends that are a multiple of it (1: each); the others'
    figures carry the highest since the last end (a reader logging one step in k sets k: the allocator then has no
    new rising phase, no copy of the categories, at every step). ``every``: only the step ends that are a multiple
    of it are kept (1: each); at the others ``step_end`` returns after one test (a reader that needs one step in k
    sets k: the allocator's step peak then runs on to the next kept step, whose figures carry the highest since the
    last end when ``peak_every`` is a multiple of ``every``). ``spent_ns`` adds up what the step ends cost from
    the engine's clock reading to the end of the log's work (the recorders' dispatch included, ``on_batch`` not):
    its owner's pacer reads it."""

    __slots__ = ("entries", "live", "on_batch", "batch_steps", "batch_s", "every", "peak_every", "spent_ns",
                 "last_kept", "_batch_ns", "_last_live")
    recorder_order = -1  # a reading: before other recorders' work at the step end

    def __init__(self, on_batch: Callable[[], None], batch_steps: int = 16, batch_s: float = 0.5,
                 live: Any = None) -> None:
        if batch_steps < 1 or not batch_s >= 0:
            raise ValueError(f"batch_steps must be >= 1 and batch_s >= 0, got {batch_steps} and {batch_s}")
        # (step, perf_counter_ns, figures per device) per step end: records shared by every log of the step end
        self.entries: list[tuple[int, int, list[tuple]]] = []
        self.live, self.on_batch, self.batch_steps, self.batch_s = live, on_batch, batch_steps, batch_s
        self._batch_ns = batch_s * 1e9
        self.every = 1  # the step ends kept: the multiples of it (see the class)
        self.last_kept: int | None = None  # the step of the last step end kept
        self.peak_every = 1  # the step peak ends at the step ends that are multiples of it (see the class)
        self.spent_ns = 0  # from each step end's clock reading to the end of this log's work there (on_batch excluded)
        self._last_live: tuple = (None, None, ())  # (step, signature, live_set()) of the last live record

    @property
    def steps(self) -> int:
        """Step ends kept since the last take."""
        return len(self.entries)

    def take(self) -> list[tuple]:
        """The records kept since the last take, oldest first: one per device and step end (see the class)."""
        return [(step, wall_time, *figure) for step, wall_time, figures in self.take_steps() for figure in figures]

    def take_steps(self) -> list[tuple[int, float, list[tuple]]]:
        """The step ends kept since the last take, oldest first: ``(step, wall time s, [(device, allocated bytes,
        step peak bytes, categories at the peak, live tensors) per device])`` each (the lists are shared)."""
        entries, self.entries = self.entries, []
        offset_s = _wall_offset_s
        return [(step, time_ns * 1e-9 + offset_s, figures) for step, time_ns, figures in entries]

    def step_end(self, event: _hooks.StepEvent) -> None:
        # NOTE: runs at every step end with the step's work just done, its caches cold: every object touched costs
        step = event.step
        if step % self.every:
            return
        self.keep(step, event.time_ns)
        entries = self.entries
        if len(entries) >= self.batch_steps or event.time_ns - entries[0][1] >= self._batch_ns:
            _set_wall_offset()
            self.on_batch()

    def keep(self, step: int, time_ns: int) -> None:
        """Keep the figures of the step end ``step`` whose clock read ``time_ns`` (``step_end`` does, for the step
        ends it keeps; a reader may call it for one ``every`` skipped, e.g. the last step before closing: the figures
        are then the allocator's now). No ``on_batch`` from here."""
        end = not step % self.peak_every
        closed = _closed
        if closed[0] != step or closed[1] != _hooks.step_resets or (end and not closed[4]):
            closed = _close(step, time_ns, end)
        self.entries.append(closed[2])
        self.last_kept = step
        if self.live is not None:
            last_step, signature, live = self._last_live
            if last_step != step - self.every or signature != closed[3]:
                live = _memory.live_set()
            self._last_live = (step, closed[3], live)
            self.live.append((step, live))
        self.spent_ns += _now() - time_ns


_now = time.perf_counter_ns
_buffers = _memory._buffers  # NOTE: the allocator's table (never rebound): its length is the live buffer count
# (step, hooks.step_resets, (step, perf_counter_ns, figures per device), live signature) of the last step end closed
_closed: tuple = (None, -1, (None, 0, []), None, False)  # ... and whether the step peaks ended there
_wall_offset_s = 0.0  # time.time() - time.perf_counter(), read again at every batch (the clocks may drift apart)


def _set_wall_offset() -> None:
    global _wall_offset_s
    _wall_offset_s = time.time() - time.perf_counter_ns() * 1e-9


def _close(step: int, time_ns: int, end: bool) -> tuple:
    """The step end's record (``time_ns``: the step end's ``perf_counter_ns`` the engine read: no clock read here),
    the allocator's step peaks read (and ended, ``end``) once for every log of the same step end; its live
    signature is the live buffer count and each device's allocated bytes (equal at two step ends in a row: nothing
    allocated or freed on balance, the same live set)."""
    global _closed
    figures = _memory.close_step_peaks(step, end)
    signature = (len(_buffers), figures[0][1]) if len(figures) == 1 else \
        (len(_buffers), *[figure[1] for figure in figures])
    _closed = (step, _hooks.step_resets, (step, time_ns, figures), signature, end)
    return _closed


_set_wall_offset()


@dataclass(frozen=True, slots=True)
class PeakCapture:
    """The live blocks at a peak of at least the armed size (``arm_peak_capture``)."""

    device: str
    step: int
    bytes: int
    blocks: tuple[_memory.Block, ...]
    grad_enabled: bool = True  # gradients were on at the peak (off: an evaluation, e.g. under engine.no_grad())


class _PeakCatcher:
    """The ``at_peak`` recorder behind ``arm_peak_capture`` (one, in the list while some device is armed)."""

    recorder_order = -1

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}  # device -> least bytes of a peak to capture
        # device -> (step, bytes, live_set() record, gradients on)
        self.captured: dict[str, tuple[int, int, tuple[_memory.Block, ...], bool]] = {}
        self.taken: dict[str, tuple] = {}  # device -> (step, hooks.step_resets, capture) of the last take(step=…)

    def at_peak(self, device: str, allocated_bytes: int) -> None:
        least = self.armed.get(device)
        if least is not None and allocated_bytes >= least:
            self.capture(device, allocated_bytes)

    def capture(self, device: str, allocated_bytes: int) -> None:
        from engine.op import is_grad_enabled  # NOTE: here, not at the top: engine.op imports this module's peers
        self.captured[device] = (_hooks._step, allocated_bytes, _memory.live_set(), is_grad_enabled())
        self.armed[device] = allocated_bytes + 1  # a higher peak later replaces it
        _memory.set_peak_floor(device, allocated_bytes + 1)


_peaks = _PeakCatcher()


def arm_peak_capture(device: str, min_bytes: int | None) -> None:
    """Keep a copy of the live buffers at the next peak of at least ``min_bytes`` on ``device`` (the first free
    after it, or ``take_peak_capture`` while still at it); a higher peak later replaces it. None disarms. Costs
    nothing per allocation: the copy is made once per peak that qualifies."""
    if min_bytes is None:
        _peaks.armed.pop(device, None)
        _memory.set_peak_floor(device, 0)
    else:
        try:
            least = operator.index(min_bytes)  # an int or a NumPy integer
        except TypeError:
            least = -1
        if least < 0:
            raise ValueError(f"peak capture size must be a non-negative number of bytes or None, got {min_bytes!r}")
        _peaks.armed[device] = least
        _memory.set_peak_floor(device, least)
    if _peaks.armed:
        _hooks.add_recorder(_peaks)
    else:
        _hooks.remove_recorder(_peaks)


def take_peak_capture(device: str = "cpu", step: int | None = None) -> PeakCapture | None:
    """The capture armed by ``arm_peak_capture`` (None if no qualifying peak happened); clears it. With ``step`` (the
    step that ended), later calls for the same step get the same answer (several readers of one step boundary); a
    step number counted again after ``hooks.reset_step`` is a new step."""
    taken = _peaks.taken.get(device)
    if step is not None and taken is not None and taken[0] == step and taken[1] == _hooks.step_resets:
        return taken[2]
    least, allocated = _peaks.armed.get(device), _memory.allocated_bytes(device)
    if least is not None and _memory.at_step_peak(device) and allocated >= least:
        _peaks.capture(device, allocated)
    captured = _peaks.captured.pop(device, None)
    capture = None if captured is None else PeakCapture(device, captured[0], captured[1],
                                                         _memory.live_set_blocks(captured[2], device), captured[3])
    if step is not None:
        _peaks.taken[device] = (step, _hooks.step_resets, capture)
    return capture
