"""MemoryTracker: an engine-hooks observer keeping live blocks, per-step ``mem/`` scalars, snapshots, OOM and leaks."""
from __future__ import annotations

import gc
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from engine import hooks, memory
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.format.memory_snapshot import MemorySnapshot, write_snapshot
from instrumentation.memory.boundary import live_groups, live_table
from instrumentation.memory.host import HostMemoryWatch
from instrumentation.memory.leak import (BYTES, CATEGORY, DEVICE, MODULE, LeakSettings, TrendWindow, attribute,
                                         groups_of_blocks, likely_cause)
from instrumentation.memory.oom import oom_alert, requested_of
from instrumentation.memory.snapshot import build_snapshot, parameter_names
from instrumentation.memory.stacks import StackRecorder
from instrumentation.memory.trend import Trend, trend

CATEGORIES = ("parameter", "gradient", "optimizer_state", "activation", "temporary", "input")
LEAK_GROUPS_IN_ALERT = 5


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """One device as the tracker sees it now."""

    device: str
    allocated_bytes: int
    peak_bytes: int  # highest allocated since the tracker started
    live_tensors: int
    by_category: dict[str, int]
    by_module: dict[str, int]


class _Tally:
    __slots__ = ("allocated", "step_peak", "rising", "record_peak", "categories", "peak_categories", "pending_peak",
                 "written_peak", "written_at", "window", "alerted", "prefix", "tags", "category_tags", "armed")

    def __init__(self, device: str, leak: LeakSettings | None) -> None:
        self.allocated = self.step_peak = self.record_peak = self.written_peak = 0
        self.written_at = -float("inf")
        self.categories: dict[str, int] = {}
        self.peak_categories: dict[str, int] = {}
        self.rising = False  # (stacks on) allocated is at step_peak and nothing was freed since: categories are the peak's
        self.pending_peak: tuple[int, int, dict[int, tuple]] | None = None
        self.window = TrendWindow(leak) if leak is not None else None
        self.alerted: set[tuple] = set()
        self.prefix = prefix = f"mem/{device}/"
        self.tags = tuple(prefix + name for name in ("allocated_bytes", "reserved_bytes", "peak_bytes", "live_tensors"))
        self.category_tags: dict[str, str] = {}  # category -> its tag (built once)
        self.armed: int | None | bool = False  # the peak capture size last asked of the allocator (False: unknown)

    def leave_peak(self) -> None:
        self.peak_categories, self.rising = self.categories.copy(), False

    def category_tag(self, category: str) -> str:
        tag = self.category_tags.get(category)
        if tag is None:
            tag = self.category_tags[category] = f"{self.prefix}{category}_bytes"
        return tag


class _BoundaryHooks:
    """What a tracker without stacks subscribes: step ends and OOMs only (the allocator keeps the rest)."""

    __slots__ = ("step_end", "oom")

    def __init__(self, tracker: MemoryTracker) -> None:
        self.step_end, self.oom = tracker.step_end, tracker.oom


class MemoryTracker:
    """Subscribes to the engine's hooks on creation; ``close()`` unsubscribes.

    ``stacks=True``: alloc/free/oom/step_end, and each allocation's user frames are recorded (see
    ``stacks.StackRecorder``); ``history``: alloc/free events kept (a ring). ``stacks=False``: only step_end and oom;
    live blocks, category bytes and the step peak are read from ``engine.memory`` at step boundaries (no Python
    call per allocation; snapshots then have no history). ``model``: names parameter and gradient buffers in snapshots. ``leak``: settings of
    the leak test (None turns it off). ``peak_snapshot_interval_s`` / ``peak_growth``: a "peak" snapshot is written
    when the all-time peak exceeds the last one written by ``peak_growth`` and that was long enough ago.
    ``host_rss``: follow the process RSS every ``host_every_steps`` steps (a read of /proc costs ~20 µs; the leak
    test's warm-up and window then count samples, not steps); ``host_attribution``: tracemalloc attribution."""

    def __init__(self, writer: Any, *, history: int = 10_000, stacks: bool = True, stack_depth: int = 4,
                 model: Any = None, leak: LeakSettings | None = LeakSettings(), peak_snapshots: bool = True,
                 peak_snapshot_interval_s: float = 30.0, peak_growth: float = 0.10, host_rss: bool = True,
                 host_attribution: bool = False, host_every_steps: int = 4) -> None:
        if history < 0:
            raise ValueError(f"history must be a number of events >= 0, got {history}")
        self.writer, self.run_dir = writer, writer.log_dir
        self._add_scalar_dict = getattr(writer, "add_scalar_dict", None)
        self.alerts = AlertWriter(self.run_dir)
        self.model, self.leak_settings = model, leak
        self.peak_snapshots, self.peak_snapshot_interval_s, self.peak_growth = peak_snapshots, peak_snapshot_interval_s, peak_growth
        if host_every_steps < 1:
            raise ValueError(f"host_every_steps must be >= 1, got {host_every_steps}")
        self.host_every_steps = host_every_steps
        self.snapshots: list[str] = []  # paths written, oldest first
        self._capture = StackRecorder(stack_depth).capture if stacks else None
        self._boundary = not stacks
        self._history: deque[tuple] = deque(maxlen=history)
        self._history_append = self._history.append
        self._origin_ns = time.perf_counter_ns()
        self._live: dict[int, tuple] = {}
        self._tallies: dict[str, _Tally] = {}
        # What was live at the last step ends (attribution: groups are summed from these only when a leak is found).
        self._group_history: deque[tuple[int, tuple]] = deque(maxlen=leak.window_steps if leak else 1)
        self._host = HostMemoryWatch(leak or LeakSettings(), attribution=host_attribution) if host_rss else None
        self._failures: set[str] = set()
        self._host_alerted = False
        self._closed = False
        if self._boundary:
            for device in memory.devices():
                memory.reset_step_peak(device)
                self._arm_peak(device, self._tally(device))
            self._hooks: Any = hooks.subscribe(_BoundaryHooks(self))
            return
        for key, nbytes, device, category, _refs in memory.live_buffers():  # what exists before we listen
            self._add(key, (nbytes, device, category, "(before tracking)", "", -1, (), "", ()))
        self._hooks = hooks.subscribe(self)

    # --- hook methods (the training thread; keep them cheap) -----------------------------------------------
    def alloc(self, event: hooks.MemoryEvent) -> None:
        stack = self._capture(2) if self._capture is not None else ()
        _, nbytes, device, buffer_id, category, op, module, _, step, shape, dtype, *_ = event  # one unpack
        self._live[buffer_id] = (nbytes, device, category, op, module, step, shape, dtype, stack)
        tally = self._tallies.get(device) or self._tally(device)
        categories = tally.categories
        categories[category] = categories.get(category, 0) + nbytes
        allocated = tally.allocated = tally.allocated + nbytes
        if allocated > tally.step_peak:
            tally.step_peak, tally.rising = allocated, True  # the categories at the peak are copied at the next free
            if allocated > tally.record_peak:
                tally.record_peak = allocated
                if (self.peak_snapshots and allocated >= tally.written_peak * (1 + self.peak_growth)
                        and time.monotonic() - tally.written_at >= self.peak_snapshot_interval_s):
                    tally.pending_peak = (step, allocated, self._copy(self._live))
        self._history_append(event)  # snapshot.history_records reads it

    def free(self, event: hooks.MemoryEvent) -> None:
        block = self._live.pop(event.buffer_id, None)
        if block is None:
            return
        nbytes, device, category, op = block[0], block[1], block[2], block[3]  # BYTES, DEVICE, CATEGORY, OP
        tally = self._tallies[device]
        if tally.rising:
            tally.leave_peak()
        tally.categories[category] -= nbytes
        tally.allocated -= nbytes
        self._history_append((event.time_ns, "free", nbytes, op, event.step, device))

    def oom(self, event: hooks.OomEvent) -> None:
        """Write the ``oom`` snapshot and alert and flush; the engine raises its ``OutOfMemoryError`` after this."""
        snapshot = build_snapshot(device=event.device, reason="oom", step=event.step, live=self._live_now(),
                                  history=self._history_now(), origin_ns=self._origin_ns, names=parameter_names(self.model),
                                  requested=requested_of(event), allocated_bytes=event.allocated_bytes,
                                  peak_bytes=self._peak(event.device))
        path = self._write(snapshot)
        self.alerts.write(oom_alert(event, snapshot, _capture_id(path)))
        self._flush()

    def step_end(self, event: hooks.StepEvent) -> None:
        step, scalars = event.step, {}
        if self.leak_settings is not None:
            self._group_history.append((step, memory.live_set() if self._boundary else self._copy(self._live.values())))
        if self._boundary:
            for device in memory.devices():
                if device not in self._tallies and not memory.allocated_bytes(device):
                    continue
                self._read_allocator(device, self._tallies.get(device) or self._tally(device))
        for device, tally in list(self._tallies.items()):
            if tally.rising:
                tally.leave_peak()
            allocated_tag, reserved_tag, peak_tag, live_tag = tally.tags
            # NOTE: floats, as the writer keeps them (it would convert each int in a call); reserved = allocated on the
            # CPU (no pool)
            scalars[allocated_tag] = scalars[reserved_tag] = float(tally.allocated)
            scalars[peak_tag] = float(tally.step_peak)
            scalars[live_tag] = float(memory.live_tensors(device))
            peak_categories, tags = tally.peak_categories, tally.category_tags
            for category in tally.categories:
                scalars[tags.get(category) or tally.category_tag(category)] = float(peak_categories.get(category, 0))
            if not self._boundary:  # (stacks off: the allocator's end_step_peak started the next step peak)
                tally.step_peak, tally.peak_categories = tally.allocated, tally.categories.copy()
            if tally.window is not None:
                found = tally.window.observe(step, tally.allocated)
                if found is not None:
                    self._report_leak(device, tally, found, step)
            if tally.pending_peak is not None:
                self._write_peak(device, tally)
            if self._boundary:
                self._arm_peak(device, tally)
        found = None
        if self._host is not None and step % self.host_every_steps == 0:
            rss, found = self._host.observe(step)
            scalars["mem/host/rss_bytes"] = float(rss)
        self._log(scalars, step)
        if found is not None:
            self._report_host_growth(found, step)

    def _log(self, scalars: dict[str, float], step: int) -> None:
        """One queue item per step when the writer has ``add_scalar_dict`` (the same events as add_scalar each)."""
        if self._add_scalar_dict is not None:
            self._add_scalar_dict(scalars, step)
            return
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)

    # --- public ------------------------------------------------------------------------------------------
    def snapshot(self, reason: str = "manual", device: str = "cpu") -> str | None:
        """Write a snapshot of ``device`` now; its path (None if it could not be written, reported once)."""
        return self._write(build_snapshot(device=device, reason=reason, step=hooks.current_step(), live=self._live_now(),
                                          history=self._history_now(), origin_ns=self._origin_ns,
                                          names=parameter_names(self.model), peak_bytes=self._peak(device)))

    def breakdown(self, device: str = "cpu") -> MemoryBreakdown:
        tally = self._tallies.get(device) or _Tally(device, None)
        by_module: dict[str, int] = {}
        for block in list(self._live_now().values()):
            if block[DEVICE] == device:
                by_module[block[MODULE]] = by_module.get(block[MODULE], 0) + block[BYTES]
        if self._boundary:
            return MemoryBreakdown(device, memory.allocated_bytes(device), self._peak(device) or 0,
                                   memory.live_tensors(device),
                                   {k: v for k, v in memory.category_bytes(device).items() if v}, by_module)
        return MemoryBreakdown(device, tally.allocated, tally.record_peak, memory.live_tensors(device),
                               {k: v for k, v in tally.categories.items() if v}, by_module)

    def close(self) -> None:
        """Unsubscribe; write a pending peak snapshot; stop tracemalloc if this tracker started it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        hooks.unsubscribe(self._hooks)
        if self._boundary:
            for device, tally in self._tallies.items():
                memory.arm_peak_capture(device, None)
                self._take_peak(device, tally)
        for device, tally in self._tallies.items():
            if tally.pending_peak is not None:
                self._write_peak(device, tally)
        if self._host is not None:
            self._host.close()

    def __enter__(self) -> MemoryTracker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------------------
    def _tally(self, device: str) -> _Tally:
        tally = self._tallies[device] = _Tally(device, self.leak_settings)
        return tally

    def _add(self, key: int, block: tuple) -> None:
        """Count a block that existed before the tracker subscribed."""
        self._live[key] = block
        tally = self._tallies.get(block[DEVICE]) or self._tally(block[DEVICE])
        tally.categories[block[CATEGORY]] = tally.categories.get(block[CATEGORY], 0) + block[BYTES]
        tally.allocated += block[BYTES]

    def _peak(self, device: str) -> int | None:
        """The highest allocated bytes this tracker saw on ``device`` (the engine's own peak spans every run)."""
        tally = self._tallies.get(device)
        if tally is None:
            return None
        return max(tally.record_peak, memory.step_peak(device).bytes) if self._boundary else tally.record_peak

    def _live_now(self) -> dict[int, tuple]:
        return live_table() if self._boundary else self._copy(self._live)

    def _history_now(self) -> tuple:
        return self._copy(self._history)

    @staticmethod
    def _copy(container: Any) -> Any:
        """A copy of a table the alloc/free handlers change. NOTE: with the cycle collector paused, no garbage
        Tensor can die in the middle (its free event would change the table under the copy's iteration)."""
        enabled = gc.isenabled()  # NOTE: not gc_paused(): a generator context manager costs more than this copy
        gc.disable()
        try:
            return dict(container) if isinstance(container, dict) else tuple(container)
        finally:
            if enabled:
                gc.enable()

    def _read_allocator(self, device: str, tally: _Tally) -> None:
        """Stacks off: this step's figures from the allocator (read before the scalars are built)."""
        tally.allocated, tally.step_peak, tally.peak_categories, tally.categories = memory.end_step_peak(device)
        if tally.step_peak > tally.record_peak:
            tally.record_peak = tally.step_peak
        self._take_peak(device, tally)

    def _take_peak(self, device: str, tally: _Tally) -> None:
        capture = memory.take_peak_capture(device)
        if capture is not None:
            tally.armed = False  # the allocator moved its capture size past this peak
            if self.peak_snapshots:
                tally.pending_peak = (capture.step, capture.bytes, live_table(capture.blocks))

    def _arm_peak(self, device: str, tally: _Tally) -> None:
        """Stacks off: ask the allocator to keep the live buffers at the next peak a "peak" snapshot is due for."""
        due = self.peak_snapshots and time.monotonic() - tally.written_at >= self.peak_snapshot_interval_s
        least = max(tally.record_peak + 1, -int(-tally.written_peak * (1 + self.peak_growth) // 1)) if due else None
        if least != tally.armed or tally.armed is False:
            memory.arm_peak_capture(device, least)
            tally.armed = least

    def _write_peak(self, device: str, tally: _Tally) -> None:
        step, allocated, live = tally.pending_peak
        tally.pending_peak = None
        tally.written_peak, tally.written_at = allocated, time.monotonic()
        self._write(build_snapshot(device=device, reason="peak", step=step, live=live, history=self._history_now(),
                                   origin_ns=self._origin_ns, names=parameter_names(self.model), allocated_bytes=allocated,
                                   peak_bytes=allocated))

    def _report_leak(self, device: str, tally: _Tally, found: Trend, step: int) -> None:
        groups_of = live_groups if self._boundary else groups_of_blocks
        window = [(at, groups_of(live)) for at, live in self._group_history if at >= found.steps[0]]
        groups = attribute(window, device, self.leak_settings.min_z)
        key = tuple((g.site, g.op, g.shape, g.category) for g in groups[:1])
        if key in tally.alerted:
            return
        tally.alerted.add(key)
        cause = likely_cause(groups)
        evidence_groups = [g.to_evidence() for g in groups[:LEAK_GROUPS_IN_ALERT]]
        path = self._write(build_snapshot(device=device, reason="leak", step=step, live=self._live_now(),
                                          history=self._history_now(), origin_ns=self._origin_ns,
                                          names=parameter_names(self.model), peak_bytes=self._peak(device),
                                          extra={"groups": evidence_groups}))
        message = f"live memory on {device} grows {memory.format_bytes(found.slope)}/step over steps {found.steps[0]}–{found.steps[-1]}"
        subject = device
        if groups:
            top = groups[0]
            subject = top.site
            message += (f": {top.count_per_step:.3g} {top.category} block(s) of shape {list(top.shape)} {top.dtype} per step "
                        f"(op {top.op or '-'}, module {top.module or '-'}) allocated at {top.site}, "
                        f"{memory.format_bytes(top.bytes_per_step)}/step")
        self.alerts.write(Alert(kind="leak", severity="warning", subject=subject, message=f"{message}. Likely cause: {cause}",
                                step=step, evidence={"device": device, "bytes_per_step": found.slope,
                                                     "recent_bytes_per_step": found.recent_slope, "mann_kendall_z": found.z,
                                                     "steps": list(found.steps), "live_bytes": list(found.values),
                                                     "groups": evidence_groups, "cause": cause,
                                                     "snapshot": _capture_id(path)}))

    def _report_host_growth(self, found: Trend, step: int) -> None:
        engine_growth = sum(trend(list(t.window.steps), list(t.window.values)).slope for t in self._tallies.values()
                            if t.window is not None and len(t.window.values) >= 2)
        if self._host_alerted or engine_growth >= 0.8 * found.slope:
            return  # engine tensors explain it: the device leak alert says more
        self._host_alerted = True
        lines = self._host.attribution(step) if self._host is not None else []
        where = f"; fastest-growing Python allocation site: {lines[0]['site']}" if lines else (
            "; switch on host_attribution=True to attribute it (tracemalloc)")
        self.alerts.write(Alert(kind="leak", severity="warning", subject="host RSS", step=step,
                                message=f"process RSS grows {memory.format_bytes(found.slope)}/step over steps "
                                        f"{found.steps[0]}–{found.steps[-1]}, outside the engine's tensors{where}",
                                evidence={"device": "host", "bytes_per_step": found.slope, "steps": list(found.steps),
                                          "rss_bytes": list(found.values), "engine_bytes_per_step": engine_growth,
                                          "python_sites": lines}))

    def _write(self, snapshot: MemorySnapshot) -> str | None:
        try:
            path = write_snapshot(self.run_dir, snapshot)
        except OSError as error:
            self._report_once("snapshot", f"cannot write a memory snapshot under {self.run_dir}: {error}")
            return None
        self.snapshots.append(path)
        return path

    def _flush(self) -> None:
        try:
            self.writer.flush()
        except Exception as error:  # noqa: BLE001 - the OOM must propagate as the engine raised it
            self._report_once("flush", f"flushing the writer failed: {type(error).__name__}: {error}")

    def _report_once(self, what: str, message: str) -> None:
        if what not in self._failures:
            self._failures.add(what)
            print(f"flowscope.memory: {message}; further failures of this kind are not reported", file=sys.stderr)


def _capture_id(path: str | None) -> str | None:
    if path is None:
        return None
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.split(".", 1)[0]
