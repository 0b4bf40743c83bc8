"""MemoryTracker: an engine-hooks observer keeping live blocks, per-step ``mem/`` scalars, snapshots, OOM and leaks."""
from __future__ import annotations

import gc
import sys
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any

from engine import hooks, is_grad_enabled, memory
from engine import memory_recording as recording
from instrumentation.budget import DEFAULT_BUDGET, Pacer, check_every
from instrumentation.format import alert_names as names
from instrumentation.format import tags as tag_names
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.format.memory_snapshot import EVALUATION, TRAINING, MemorySnapshot, write_snapshot
from instrumentation.format.units import format_bytes
from instrumentation.memory.boundary import live_groups, live_table
from instrumentation.memory.fragmentation import FragmentationWatch
from instrumentation.memory.host import HostMemoryWatch
from instrumentation.memory.leak import LeakSettings, TrendWindow, attribute, likely_cause, site_of
from instrumentation.memory.oom import oom_alert, requested_of
from instrumentation.memory.snapshot import build_snapshot, parameter_names
from instrumentation.memory.stacks import StackRecorder
from instrumentation.memory.trend import Trend, trend
from instrumentation.profiler.spans import log_end, log_start

HOST_RSS_TAG = tag_names.memory_tag(tag_names.HOST_DEVICE, tag_names.RSS_BYTES)
LOG_SPAN = "memory tracker"  # its batch processing in a profiler's trace (category "log")
LEAK_GROUPS_IN_ALERT = 5
# What a logged step costs in all, as a multiple of what _log_steps took for it: the writer thread then encodes its
# row (measured on the digits MLP: ~3 µs a row of ten scalars, about what _log_steps took)
RUN_WEIGHT = 2.0
# Steps per batch until the pacer's first decision after its warm-up; batch_steps after it. A batch costs ~300 µs of
# cold Python and slows the next few steps by ~100 µs more (measured on the digits MLP): few batches, long ones.
WARMUP_BATCH_STEPS = 16


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
    __slots__ = ("device", "allocated", "record_peak", "pending_peak", "written_peak", "written_at", "window",
                 "alerted", "tags", "category_tags", "armed", "held", "confirm_until", "limit", "limit_tag")

    def __init__(self, device: str, leak: LeakSettings | None) -> None:
        self.device = device
        self.allocated = self.record_peak = self.written_peak = 0
        self.written_at = -float("inf")
        self.pending_peak: tuple[int, int, dict[int, memory.Block], str] | None = None  # step, bytes, live, phase
        self.window = TrendWindow(leak) if leak is not None else None
        self.alerted: set[tuple] = set()
        self.tags = tuple(tag_names.memory_tag(device, stat) for stat in tag_names.MEMORY_STATS)
        self.category_tags: dict[str, str] = {}  # category -> its tag (built once)
        self.armed: int | None | bool = False  # the peak capture size last asked of the allocator (False: unknown)
        self.held: tuple[int, dict[str, int]] | None = None  # the highest step peak of the steps not logged since
        self.confirm_until = -1  # growth found over steps kept one in k: every step end is kept until this step
        self.limit: int | None | bool = False  # the allocator limit last logged (False: none logged yet)
        self.limit_tag = tag_names.memory_tag(device, tag_names.LIMIT_BYTES)

    def category_tag(self, category: str) -> str:
        tag = self.category_tags.get(category)
        if tag is None:
            tag = self.category_tags[category] = tag_names.category_tag(self.device, category)
        return tag


class MemoryTracker:
    """Adds its recorders to the engine on creation (its own ``oom`` and a step log); ``close()`` removes them.

    Everything per allocation and per step happens in the engine: the allocator (``engine.memory``) keeps each live
    buffer's metadata, the category bytes and the step peak; the engine's memory recorders
    (``engine.memory_recording``) keep, when asked, a copy of the live buffers at a peak, and at each step end append
    the step's figures to the tracker's ``StepLog``; the tracker processes them in batches. ``stacks=True`` adds a
    site recorder (each new buffer's user frames, see ``stacks.StackRecorder``) and ``history`` a ring of its last
    alloc/free records (saved in snapshots);
    ``stacks=False`` has neither. ``model``: names parameter and gradient buffers in snapshots. ``leak``: settings
    of the leak test (None turns it off). ``peak_snapshot_interval_s`` / ``peak_growth``: every new all-time peak is
    captured; the highest waits and is written as a "peak" snapshot when it exceeds the last one written by
    ``peak_growth`` and that was long enough ago, and by ``close()`` in any case (the last one is the highest).
    ``host_rss``: follow the process RSS, read when a batch is processed and ``host_every_steps`` steps or
    ``host_every_s`` seconds passed since the last read (the leak test's warm-up and window then count reads, not
    steps; a read and its event cost ~60 µs in a training loop). ``batch_steps`` /
    ``batch_s``: the step ends' figures are processed (scalars handed to the writer, leak tests, peak snapshots)
    every that many step ends kept (at most ``WARMUP_BATCH_STEPS`` until the pacer's first decision, or the first
    batch with a fixed ``every``) or seconds, on ``writer.flush()`` (a flowscope writer), ``snapshot()``,
    ``pause()`` and ``close()``; ``host_attribution``: tracemalloc attribution. ``budget``: the share of step time
    keeping and processing the step ends may cost; a pacer (``instrumentation.budget``) measures it and the step
    time (from the step ends' wall times) and logs the ``mem/`` scalars of one step in k, each logged
    ``peak_bytes`` (and the categories at it) being the highest of the steps since the last logged one; peak
    captures and OOM capture see every step. Once the pacer has decided only the logged step ends are kept
    (``StepLog.every``), and every one again while a leak window is not full or rises (``_wants_every_step``): a leak is
    reported from a window of consecutive steps. ``every``: log one step in ``every`` instead (1: every step)."""

    def __init__(self, writer: Any, *, history: int = 10_000, stacks: bool = True, stack_depth: int = 4,
                 model: Any = None, leak: LeakSettings | None = LeakSettings(), peak_snapshots: bool = True,
                 peak_snapshot_interval_s: float = 30.0, peak_growth: float = 0.10, host_rss: bool = True,
                 host_attribution: bool = False, host_every_steps: int = 64, host_every_s: float = 1.0,
                 batch_steps: int = 256, batch_s: float = 0.5, budget: float = DEFAULT_BUDGET,
                 every: int | None = None) -> None:
        if history < 0:
            raise ValueError(f"history must be a number of events >= 0, got {history}")
        if host_every_steps < 1 or not host_every_s >= 0:
            raise ValueError(f"host_every_steps must be >= 1 and host_every_s >= 0, got {host_every_steps} and "
                             f"{host_every_s}")
        self.pace = Pacer(tag_names.MEMORY_OBSERVER, budget, every=check_every("MemoryTracker", every),
                          run_weight=RUN_WEIGHT)
        self._last_wall: float | None = None  # the wall time of the last batch's last step end
        self._last_at: tuple[int, int] = (-1, -1)  # ... its (hooks.step_resets, step)
        self.writer, self.run_dir = writer, writer.log_dir
        self._add_scalar_rows = getattr(writer, "add_scalar_rows", None)
        self._add_scalar_dict = getattr(writer, "add_scalar_dict", None)
        self.alerts = AlertWriter(self.run_dir)
        self.model, self.leak_settings = model, leak
        self.peak_snapshots, self.peak_snapshot_interval_s = peak_snapshots, peak_snapshot_interval_s
        self.peak_growth = peak_growth
        self.host_every_steps, self.host_every_s = host_every_steps, host_every_s
        self.snapshots: list[str] = []  # paths written, oldest first
        self._stacks = stacks
        # NOTE: the allocator calls it from register(), whose caller is always engine code: start one frame above
        # that (skip=3), so that frame is never materialized (a Python frame object is made for each frame visited)
        self._recorder = recording.SiteRecorder(partial(StackRecorder(stack_depth).capture, 3)) if stacks else None
        # alloc/free records appended by the engine's history recorder (stacks on); snapshot.history_records reads them
        self._history: deque[tuple] = deque(maxlen=history)
        self._history_recorder = recording.HistoryRing(self._history)
        self._origin_ns = time.perf_counter_ns()
        self._tallies: dict[str, _Tally] = {}
        self._tags: tuple[str, ...] = ()  # the tags of each step's values: every device's tally.tags and categories
        # What was live at the last step ends (attribution: groups are summed from these only when a leak is found).
        # NOTE: a batch's steps are checked when it is processed: the window may begin a batch before the last step
        self._group_history: deque[tuple[int, tuple]] | None = \
            deque(maxlen=leak.window_steps + batch_steps) if leak else None
        self._group_cache: dict[int, tuple[tuple, dict]] = {}  # step -> (its live_set() record, its live groups)
        self.batch_steps = batch_steps
        # NOTE: short batches until the pacer's first decision (it decides per batch), then batch_steps
        self._steps = recording.StepLog(self._on_batch, min(batch_steps, WARMUP_BATCH_STEPS), batch_s,
                                        live=self._group_history)
        self._steps.peak_every = self.pace.interval
        self._host_step, self._host_read_at = -host_every_steps, -float("inf")  # the last RSS read: step, monotonic s
        self._host = HostMemoryWatch(leak or LeakSettings(), attribution=host_attribution) if host_rss else None
        self._failures: set[str] = set()
        self._host_alerted = False
        self._fragmentation = FragmentationWatch()
        self._closed = False
        self._sampled: tuple[int, int] | None = None  # (hooks.step_resets, step) of the last sample outside a step end
        # (hooks.step_resets, entry) of the last step end processed when it was not logged (close() logs it)
        self._unlogged: tuple[int, tuple] | None = None
        for device in memory.devices():
            memory.reset_step_peak(device)
            self._arm_peak(device, self._tally(device))
        self._paused = False
        self._attach_recording()
        # a writer.flush() hands over the steps not processed yet (third-party writers: up to batch_steps/batch_s late)
        self._on_flush = getattr(writer, "add_flush_callback", None)
        if self._on_flush is not None:
            self._on_flush(self._process)
        hooks.add_recorder(self)

    # --- hook methods (the training thread; keep them cheap) -----------------------------------------------
    def oom(self, event: hooks.OomEvent) -> None:
        """Log the OOM step's figures so far (a sample: its charts reach the failing step), write the ``oom`` snapshot
        and alert and flush; the engine raises its ``OutOfMemoryError`` after this."""
        self._process_safely()
        self._sample_safely(event.step)
        snapshot = self._snapshot(event.device, names.OOM, event.step, self._live_now(), requested=requested_of(event),
                                  allocated_bytes=event.allocated_bytes, peak_bytes=self._peak(event.device),
                                  phase=_phase_now())
        path = self._write(snapshot)
        self.alerts.write(oom_alert(event, snapshot, _capture_id(path)))
        self._flush()

    def _on_batch(self) -> None:
        """The allocator's call every ``batch_steps`` steps or ``batch_s`` seconds (a "log" span in a profile)."""
        start = log_start()
        self._process()
        log_end(LOG_SPAN, start)

    def _process(self, final: bool = False) -> None:
        """Scalars, leak tests and peak snapshots of the step ends logged since the last call, in step order;
        ``final``: the last one is logged whatever the interval (closing). Each device's figures are read as
        columns (a leak window takes its steps and bytes as lists; a logged peak is the highest of a slice): Python
        work per logged step, C work per step."""
        began = time.perf_counter_ns()
        entries = self._steps.take_steps()
        sampled = self._sampled
        if sampled is not None and sampled[0] == hooks.step_resets and entries and entries[0][0] <= sampled[1]:
            entries = [entry for entry in entries if entry[0] > sampled[1]]  # a sample already logged these steps
        if not entries:
            return
        step_log_ns, self._steps.spent_ns = self._steps.spent_ns, 0
        interval = self._steps.peak_every  # the interval these steps were recorded with (their peaks ended at it)
        steps = [entry[0] for entry in entries]
        logged_at = {index for index, step in enumerate(steps) if step % interval == 0}
        if final:
            logged_at.add(len(steps) - 1)
        columns = self._columns(entries)
        for tally, (indices, allocated, peaks, _, _) in columns.items():
            peak_before = tally.record_peak
            tally.allocated = allocated[-1]
            tally.record_peak = max(tally.record_peak, max(peaks))
            if tally.window is not None:
                device_steps = steps if indices is None else [steps[i] for i in indices]
                for step, found in tally.window.observe_many(device_steps, allocated):
                    in_window = self._in_window(found)
                    if self._known_growth(tally, in_window):
                        continue  # the same growth as an alert already raised
                    if found.steps[-1] - found.steps[0] == len(found.steps) - 1:
                        position = device_steps.index(step)
                        if self._report_leak(tally.device, tally, found, step, in_window,
                                             max(peak_before, max(peaks[:position + 1]))):
                            # NOTE: an alert's step is logged (a sample): its chart shows the step it names
                            logged_at.add(position if indices is None else indices[position])
                    else:  # NOTE: growth seen one step in k: confirmed (and measured) over a window of steps
                        tally.confirm_until = step + self.leak_settings.window_steps + self._steps.batch_steps
        reserved, alerted = self._pools(steps[-1])
        if alerted:
            logged_at.add(len(steps) - 1)  # the fragmentation alert's step
        logged_at = sorted(logged_at)
        self._unlogged = None if logged_at and logged_at[-1] == len(steps) - 1 else (hooks.step_resets, entries[-1])
        logged: list[tuple[int, float, list]] = [(steps[index], entries[index][1], []) for index in logged_at]
        for tally, (indices, allocated, peaks, at_peak, live_tensors) in columns.items():
            self._logged_figures(tally, indices, logged_at, logged, (allocated, peaks, at_peak, live_tensors))
        logged = [row for row in logged if row[2]]  # a step before any device was allocated on has none
        logging = time.perf_counter_ns()
        self._log_steps(logged, reserved)
        self._log_limits(logged[0][0] if logged else steps[-1])
        run_ns = time.perf_counter_ns() - logging
        last_step = steps[-1]
        if self.peak_snapshots and not self._closed:  # NOTE: closing takes and writes the last peaks itself
            for device, tally in self._tallies.items():
                self._take_peak(device, tally, last_step)
                if self._peak_due(tally):
                    self._write_peak(device, tally)
                self._arm_peak(device, tally)
        if self._host is not None:
            self._observe_host(last_step)
        # NOTE: keeping a step end and processing it is the logged steps' cost (their share of the kept ones); the
        # others (kept before the first decision, or while live bytes rise) are every step's
        kept_ns = time.perf_counter_ns() - began - run_ns + step_log_ns
        logged_kept_ns = kept_ns * len(logged) // len(entries)
        self._account(entries, len(logged), kept_ns - logged_kept_ns, run_ns + logged_kept_ns)

    def _columns(self, entries: list[tuple[int, float, list]]) -> dict[_Tally, tuple]:
        """Each device's figures as columns: tally → (indices into ``entries`` or None for all of them, allocated,
        step peaks, categories at the peaks, live tensors); a device never allocated on is left out until it is."""
        figures = [entry[2] for entry in entries]
        if sum(map(len, figures)) == len(figures):  # one device ("cpu", always first), the usual case: no loop
            devices, allocated, peaks, at_peak, live_tensors = zip(*[figure[0] for figure in figures])
            tally = self._tallies.get(devices[0])
            if tally is not None:
                return {tally: (None, allocated, peaks, at_peak, live_tensors)}
        columns: dict[str, tuple] = {}
        for index, per_device in enumerate(figures):
            for device, allocated, peak, at_peak, live_tensors in per_device:
                column = columns.get(device)
                if column is None:
                    if device not in self._tallies and not allocated and not peak:
                        continue
                    column = columns[device] = ([], [], [], [], [])
                for values, value in zip(column, (index, allocated, peak, at_peak, live_tensors)):
                    values.append(value)
        return {self._tallies.get(device) or self._tally(device): column for device, column in columns.items()}

    @staticmethod
    def _logged_figures(tally: _Tally, indices: list[int] | None, logged_at: list[int], logged: list,
                        columns: tuple) -> None:
        """Append ``tally``'s figures to each logged step of ``logged`` (indices ``logged_at`` into the batch)
        where it has them; the peak (and the categories at it) logged is the highest since the last logged step,
        the later of equal ones (``tally.held`` carries the highest of steps not logged yet into the next batch)."""
        allocated, peaks, at_peak, live_tensors = columns
        if indices is None:
            positions = logged_at
        else:
            where = {index: position for position, index in enumerate(indices)}
            positions = [where.get(index, -1) for index in logged_at]
        start = 0
        for position, row in zip(positions, logged):
            if position < 0:
                continue
            best = max(range(position, start - 1, -1), key=peaks.__getitem__)  # the latest of the highest
            peak, categories = peaks[best], at_peak[best]
            held = tally.held
            if held is not None and held[0] > peak:
                peak, categories = held
            tally.held = None
            row[2].append((tally, allocated[position], peak, categories, live_tensors[position]))
            start = position + 1
        if start < len(peaks):  # steps after the last logged one: their highest peak waits for the next logged step
            best = max(range(len(peaks) - 1, start - 1, -1), key=peaks.__getitem__)
            held = tally.held
            if held is None or peaks[best] >= held[0]:
                tally.held = (peaks[best], at_peak[best])

    def _log_again(self, entry: tuple[int, float, list]) -> None:
        """Log the figures of a step end already processed but not logged (its peak: the highest since the last
        logged step, held by the tallies); nothing is observed again (leak windows, peaks, the pacer)."""
        self._unlogged = None
        logged: list[tuple[int, float, list]] = [(entry[0], entry[1], [])]
        for tally, (indices, allocated, peaks, at_peak, live_tensors) in self._columns([entry]).items():
            self._logged_figures(tally, indices, [0], logged, (allocated, peaks, at_peak, live_tensors))
        self._log_steps([row for row in logged if row[2]], self._reserved())

    def _account(self, records: list[tuple], logged: int, fixed_ns: int, run_ns: int) -> None:
        """Hand the batch's measured cost to the pacer; the step time is the wall time between step ends."""
        first_step, first_wall, last_step, last_wall = records[0][0], records[0][1], records[-1][0], records[-1][1]
        steps = last_step - first_step + 1
        step_ns = None  # NOTE: unknown for a first batch of one step end (e.g. processed for its age, batch_s)
        if self._last_wall is not None and last_wall > self._last_wall:
            step_ns = (last_wall - self._last_wall) * 1e9
            if self._last_at[0] == hooks.step_resets and self._last_at[1] < last_step:
                # NOTE: the steps since the last batch's last one, those not kept (one in k) included: a batch of the
                # one step end kept at close after a long interval covers all the steps since the last batch
                steps = last_step - self._last_at[1]
        elif steps > 1:
            step_ns = (last_wall - first_wall) * 1e9 * steps / (steps - 1)
        # NOTE: kept even when this batch measured nothing: the next batch's step time is taken from it (a tracker
        # seeing only one-step batches used to measure nothing, keep every step end and never switch batch_steps)
        self._last_wall, self._last_at = last_wall, (hooks.step_resets, last_step)
        if step_ns is not None and self.pace.record(int(step_ns), fixed_ns, run_ns, logged, steps):
            self.pace.last.write(self.writer, last_step)
        decided = self._past_first_decision()
        if decided:
            self._steps.batch_steps = self.batch_steps
        self._steps.peak_every = self.pace.interval  # NOTE: the step peak ends at the logged steps only
        # NOTE: the step ends kept: the logged ones; every one until the first decision and while live bytes rise
        self._steps.every = self.pace.interval if decided and not self._wants_every_step() else 1

    def _past_first_decision(self) -> bool:
        """Whether the pacer has made its first decision after its warm-up (or, with a fixed ``every``, needs none)."""
        return self.pace.fixed or self.pace.seen_steps >= self.pace.warmup_steps

    def _wants_every_step(self) -> bool:
        """Whether some device's leak window (or the host RSS's) is not full yet or rises over its last step ends
        (reads) with no leak reported on it yet, or growth found over step ends kept one in k waits for its
        confirmation: every step end is then kept. A leak is reported from a window of steps, not intervals (its
        bytes per step measured there), and the batches, which read the RSS, come every ``batch_steps`` steps."""
        if self._host is not None and not self._host_alerted and self._host.wants_every_step():
            return True
        last_step = self._steps.last_kept or 0
        return any(tally.window is not None and (tally.confirm_until >= last_step or
                                                 (not tally.alerted and tally.window.wants_every_step()))
                   for tally in self._tallies.values())

    def _log_steps(self, logged: list[tuple[int, float, list]], reserved: dict[str, int]) -> None:
        """The ``mem/`` scalars of the steps to log: (step, wall time, figures per device) each; ``reserved``: the
        reserved bytes of the devices with a pool (read once per batch), the others reserve what they allocate."""
        tags, batch, steps, walls = self._tags, [], [], []
        for step, wall_time, figures in logged:
            values: list[float] = []
            for tally, allocated, peak, at_peak, live_tensors in figures:
                category_tags = tally.category_tags
                if len(category_tags) < len(at_peak):  # a category seen for the first time (they are never dropped)
                    for category in at_peak:
                        tally.category_tag(category)
                # NOTE: floats, as the writer keeps them; reserved = allocated on the CPU (no pool); tally.tags order
                values += [float(allocated), float(max(reserved.get(tally.device, 0), allocated)), float(peak),
                           float(live_tensors)]
                values += [float(at_peak.get(category, 0)) for category in category_tags]
            if len(values) != len(tags):  # a device or a category appeared: a new list of tags from here on
                self._log(tags, batch, steps, walls)
                tags, batch, steps, walls = self._tags_of(figures), [], [], []
            batch.append(values)
            steps.append(step)
            walls.append(wall_time)
        self._log(tags, batch, steps, walls)
        self._tags = tags

    def _pools(self, last_step: int) -> tuple[dict[str, int], bool]:
        """Reserved bytes of the devices with a pooled allocator, read now, and whether a ``fragmentation`` alert
        was written (one holds too much memory that the current requests cannot use)."""
        pools = self._pool_stats()
        alerted = False
        for stats in pools.values():
            alert = self._fragmentation.observe(stats, last_step)
            if alert is not None:
                self.alerts.write(alert)
                alerted = True
        return {device: stats.reserved_bytes for device, stats in pools.items()}, alerted

    def _pool_stats(self) -> dict[str, Any]:
        """The pool statistics of the devices with a pooled allocator, read now."""
        pools = {}
        for device in self._tallies:
            stats = memory.pool_stats(device)
            if stats is not None:
                pools[device] = stats
        return pools

    def _reserved(self) -> dict[str, int]:
        """Reserved bytes of the devices with a pooled allocator, read now (no fragmentation check)."""
        return {device: stats.reserved_bytes for device, stats in self._pool_stats().items()}

    def _log_limits(self, step: int) -> None:
        """``mem/<device>/limit_bytes`` at ``step`` for each device whose allocator limit changed since the last one
        logged (the first batch logs a limit set before it; NaN: the limit was removed). Once per batch."""
        for device, tally in self._tallies.items():
            limit = memory.stats(device).limit_bytes
            if limit == tally.limit or (limit is None and tally.limit is False):
                continue
            tally.limit = limit
            self.writer.add_scalar(tally.limit_tag, float("nan") if limit is None else float(limit), step)

    def _sample(self, step: int, end: bool = False) -> None:
        """Log the figures of ``step`` now, outside a step end (a sample: an OOM in it, or closing after it): the
        allocated bytes now and the step peak since the last one ended (``end``: it ends here). The steps up to
        ``step`` that end later are not logged again."""
        self._process()
        if not self._tallies:
            return
        self._steps.entries.append((step, time.perf_counter_ns(), memory.close_step_peaks(step, end)))
        self._steps.last_kept = step
        self._process(final=True)
        self._sampled = (hooks.step_resets, step)

    def _sample_safely(self, step: int) -> None:
        try:
            self._sample(step)
        except Exception as error:  # noqa: BLE001 - the OOM must propagate as the engine raised it
            self._report_once("sample", f"logging the figures of step {step} failed: {type(error).__name__}: {error}")

    def _observe_host(self, step: int) -> None:
        """The RSS now, as the last ended step's, when ``host_every_steps`` or ``host_every_s`` passed since the last
        read."""
        now = time.monotonic()
        if step - self._host_step < self.host_every_steps and now - self._host_read_at < self.host_every_s:
            return
        self._host_step, self._host_read_at = step, now
        rss = self._host.read_rss()
        found = self._host.observe(step, rss)
        self.writer.add_scalar(HOST_RSS_TAG, float(rss), step)  # its own event
        if found is not None:
            self._report_host_growth(found, step)

    @staticmethod
    def _tags_of(figures: list) -> tuple[str, ...]:
        """The tags of a step's values: each device's four figures then its categories, in the figures' order."""
        return tuple(tag for figure in figures for tag in (*figure[0].tags, *figure[0].category_tags.values()))

    def _log(self, tags: tuple[str, ...], rows: list[list[float]], steps: list[int], walls: list[float]) -> None:
        """Steps' scalars as one queue item when the writer has ``add_scalar_rows``; else one ``add_scalar_dict``
        per step, or one ``add_scalar`` per value (third-party writers)."""
        if not rows:
            return
        if self._add_scalar_rows is not None:
            self._add_scalar_rows(tags, rows, steps, walls)
        elif self._add_scalar_dict is not None:
            for values, step, wall_time in zip(rows, steps, walls):
                self._add_scalar_dict(dict(zip(tags, values)), step, walltime=wall_time)
        else:
            for values, step, wall_time in zip(rows, steps, walls):
                for tag, value in zip(tags, values):
                    self.writer.add_scalar(tag, value, step, walltime=wall_time)

    # --- public ------------------------------------------------------------------------------------------
    def snapshot(self, reason: str = "manual", device: str = "cpu") -> str | None:
        """Write a snapshot of ``device`` now; its path (None if it could not be written, reported once)."""
        self._process()
        return self._write(self._snapshot(device, reason, hooks.current_step(), self._live_now(),
                                          peak_bytes=self._peak(device), phase=_phase_now()))

    @property
    def kept_every(self) -> int:
        """The step ends kept now: one in this many (1 while a leak window fills or rises: see the class)."""
        return self._steps.every

    @property
    def settled(self) -> bool:
        """Whether it keeps only the step ends it logs (its steady state: past the filling of its leak windows and
        the pacer's first decision, nothing rising)."""
        return self._past_first_decision() and self._steps.every == self.pace.interval

    def breakdown(self, device: str = "cpu") -> MemoryBreakdown:
        by_module: dict[str, int] = {}
        for block in memory.live_blocks(device):
            by_module[block.module] = by_module.get(block.module, 0) + block.bytes
        return MemoryBreakdown(device, memory.allocated_bytes(device), self._peak(device) or 0,
                               memory.live_tensors(device),
                               {k: v for k, v in memory.category_bytes(device).items() if v}, by_module)

    def pause(self) -> None:
        """Stop observing until ``resume()`` (e.g. around an evaluation loop): no work per step, no allocation stacks
        or history; what the tracker learnt is kept. The steps taken so far are processed now."""
        if self._paused or self._closed:
            return
        self._paused = True
        hooks.remove_recorder(self)
        self._detach_recording()
        self._process()

    def resume(self) -> None:
        """Observe again after ``pause()``; the first step peak then covers what happened while paused. The pacer's
        step time is taken from the step ends seen after it (the pause is not a long step)."""
        if not self._paused or self._closed:
            return
        self._paused = False
        self._last_wall = None  # NOTE: the steps between the last step end before the pause and now ran unobserved
        self._attach_recording()
        hooks.add_recorder(self)

    def _attach_recording(self) -> None:
        hooks.add_recorder(self._steps)
        if self._recorder is not None:
            hooks.add_recorder(self._recorder)
            if self._history.maxlen:
                hooks.add_recorder(self._history_recorder)

    def _detach_recording(self) -> None:
        for recorder in (self._steps, self._recorder, self._history_recorder):
            hooks.remove_recorder(recorder)

    def close(self) -> None:
        """Unsubscribe; write a pending peak snapshot; stop tracemalloc if this tracker started it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        hooks.remove_recorder(self)
        if self._on_flush is not None:
            self.writer.remove_flush_callback(self._process)
        current = hooks.current_step()  # the step in progress (never ended); the last that ended is the one before
        last = current - 1
        for device, tally in self._tallies.items():
            recording.arm_peak_capture(device, None)
            self._take_peak(device, tally)
        if not self._paused and self._worked_after_last_step(current):
            # NOTE: e.g. an evaluation after the last training step: the step in progress is logged (a sample, with
            # the highest peak since the last logged step), so the chart reaches the peak its snapshot shows
            self._sample(current, end=True)
        else:
            if not self._paused and self._steps.every > 1 and last >= 0 and self._steps.last_kept != last:
                self._steps.keep(last, time.perf_counter_ns())  # its step end was skipped: its figures are now's
            self._process(final=True)
            unlogged = self._unlogged
            if unlogged is not None and unlogged[0] == hooks.step_resets and unlogged[1][0] == last:
                # NOTE: the last step end was processed before closing (its batch was due: batch_steps or batch_s)
                # without being logged: it is logged now, as the closing one
                self._log_again(unlogged[1])
        if not self._paused:
            self._detach_recording()
        for device, tally in self._tallies.items():
            if tally.pending_peak is not None:  # the highest peak is written whatever the interval or growth
                self._write_peak(device, tally)
        if self._host is not None:
            self._host.close()

    def __enter__(self) -> MemoryTracker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------------------
    def _worked_after_last_step(self, current: int) -> bool:
        """Whether the step in progress reached a new highest peak after the last step end (e.g. an evaluation after
        training): a sample at closing then logs it, as its "peak" snapshot will show it."""
        if self._sampled == (hooks.step_resets, current) or self._steps.last_kept is None or \
                self._steps.last_kept >= current:
            return False
        return any(tally.pending_peak is not None and tally.pending_peak[0] >= current
                   for tally in self._tallies.values())

    def _tally(self, device: str) -> _Tally:
        tally = self._tallies[device] = _Tally(device, self.leak_settings)
        return tally

    def _peak(self, device: str) -> int | None:
        """The highest allocated bytes this tracker saw on ``device`` (the engine's own peak spans every run)."""
        tally = self._tallies.get(device)
        return None if tally is None else max(tally.record_peak, memory.step_peak(device).bytes)

    def _live_now(self) -> dict[int, memory.Block]:
        return live_table()

    def _snapshot(self, device: str, reason: str, step: int, live: dict[int, memory.Block],
                  **figures: Any) -> MemorySnapshot:
        """The snapshot of ``live`` (buffer id → block) with the history ring, the model's parameter names and the
        blocks' stacks (when this tracker records them); ``figures``: build_snapshot's other arguments."""
        return build_snapshot(device=device, reason=reason, step=step, live=live, history=self._history_now(),
                              origin_ns=self._origin_ns, names=parameter_names(self.model), stacks=self._stacks,
                              **figures)

    def _history_now(self) -> tuple:
        """A copy of the history ring. NOTE: with the cycle collector paused, no garbage Tensor can die in the middle
        (its free would append to the ring under the copy's iteration)."""
        enabled = gc.isenabled()  # NOTE: not gc_paused(): a generator context manager costs more than this copy
        gc.disable()
        try:
            return tuple(self._history)
        finally:
            if enabled:
                gc.enable()

    def _take_peak(self, device: str, tally: _Tally, step: int | None = None) -> None:
        """Keep the allocator's capture as the pending peak when it is higher than the pending one and the last
        written one (a capture the rate limit held back is replaced by a higher one, never dropped for it)."""
        if tally.armed is None:
            return
        capture = recording.take_peak_capture(device, step)
        if capture is None:
            return
        tally.armed = False  # the allocator moved its capture size past this peak
        pending = tally.pending_peak
        if capture.bytes > tally.written_peak and (pending is None or capture.bytes > pending[1]):
            tally.pending_peak = (capture.step, capture.bytes, live_table(capture.blocks),
                                  TRAINING if capture.grad_enabled else EVALUATION)

    def _peak_due(self, tally: _Tally) -> bool:
        """A pending peak is written when ``peak_snapshot_interval_s`` passed since the last one and it exceeds
        that one by ``peak_growth`` (``close()`` writes it regardless)."""
        pending = tally.pending_peak
        return (pending is not None and time.monotonic() - tally.written_at >= self.peak_snapshot_interval_s
                and pending[1] >= tally.written_peak * (1 + self.peak_growth))

    def _arm_peak(self, device: str, tally: _Tally) -> None:
        """Ask the allocator to keep the live buffers at the next peak above every one seen so far: each new
        all-time peak is captured (one copy of the live-buffer table per new high, none per step otherwise), so
        the last "peak" snapshot is the state at the highest peak whatever the rate limit held back."""
        least = max(tally.record_peak, tally.pending_peak[1] if tally.pending_peak else 0) + 1 \
            if self.peak_snapshots else None
        if least != tally.armed or tally.armed is False:
            recording.arm_peak_capture(device, least)
            tally.armed = least

    def _write_peak(self, device: str, tally: _Tally) -> None:
        step, allocated, live, phase = tally.pending_peak
        tally.pending_peak = None
        tally.written_peak, tally.written_at = allocated, time.monotonic()
        self._write(self._snapshot(device, "peak", step, live, allocated_bytes=allocated, peak_bytes=allocated,
                                   phase=phase))

    def _groups_at(self, step: int, live: tuple) -> dict[tuple, tuple[int, int]]:
        """The live groups of a step end's ``live_set()`` record, summed once per record while its step is in the
        leak window (each check after the first groups only the steps that entered the window since)."""
        cached = self._group_cache.get(step)
        if cached is None or cached[0] is not live:
            cached = self._group_cache[step] = (live, live_groups(live, self._stacks))
        return cached[1]

    def _in_window(self, found: Trend) -> list[tuple[int, tuple]]:
        """The live-set records of the step ends kept in ``found``'s window (the group cache keeps only theirs)."""
        in_window = [(at, live) for at, live in self._group_history if found.steps[0] <= at <= found.steps[-1]]
        steps_in_window = {at for at, _ in in_window}
        for old in [at for at in self._group_cache if at not in steps_in_window]:
            del self._group_cache[old]
        return in_window

    def _known_growth(self, tally: _Tally, in_window: list[tuple[int, tuple]]) -> bool:
        """Whether the window's growth is that of an alert already raised (no attribution, no snapshot)."""
        return bool(tally.alerted) and len(in_window) >= 2 and self._top_growth_alerted(tally.device, tally, in_window)

    def _report_leak(self, device: str, tally: _Tally, found: Trend, step: int,
                     in_window: list[tuple[int, tuple]], peak_bytes: int) -> bool:
        """Write the leak alert and its snapshot of the live buffers at ``step``'s end (``peak_bytes``: the highest
        allocated up to that step end); False when the growth is that of an alert already raised."""
        window = [(at, self._groups_at(at, live)) for at, live in in_window]
        groups = attribute(window, device, self.leak_settings.min_z)
        key = tuple((g.site, g.op, g.shape, g.category) for g in groups[:1])
        if key in tally.alerted:
            return False
        tally.alerted.add(key)
        cause = likely_cause(groups)
        evidence_groups = [g.to_evidence() for g in groups[:LEAK_GROUPS_IN_ALERT]]
        # NOTE: the live buffers at the step the leak was found (its batch may be processed steps later)
        at_step = in_window[-1][1] if in_window and in_window[-1][0] == step else None
        # NOTE: a record's blocks keyed by their own id: a buffer freed since may have left its id to a parameter
        live = self._live_now() if at_step is None else \
            {id(block): block for block in memory.live_set_blocks(at_step, device)}
        # NOTE: allocated = the live bytes at that step end (the window's last value), as the chart's point there
        path = self._write(self._snapshot(device, names.LEAK, step, live, allocated_bytes=int(found.values[-1]),
                                          peak_bytes=peak_bytes, extra={"groups": evidence_groups}, phase=TRAINING))
        message = (f"live memory on {device} grows {format_bytes(found.slope)}/step over steps "
                   f"{found.steps[0]}–{found.steps[-1]}")
        subject = device
        if groups:
            top = groups[0]
            subject = top.site
            message += (f": {top.count_per_step:.3g} {top.category} block(s) of shape {list(top.shape)} {top.dtype} "
                        f"per step {top.origin()}, {format_bytes(top.bytes_per_step)}/step")
        self.alerts.write(Alert(kind=names.LEAK, severity="warning", subject=subject,
                                message=f"{message}. Likely cause: {cause}", step=step,
                                evidence={"device": device, names.BYTES_PER_STEP: found.slope,
                                          "recent_bytes_per_step": found.recent_slope, "mann_kendall_z": found.z,
                                          names.STEPS: list(found.steps), names.LIVE_BYTES: list(found.values),
                                          names.GROUPS: evidence_groups, "cause": cause,
                                          names.SNAPSHOT: _capture_id(path)}))
        return True

    def _top_growth_alerted(self, device: str, tally: _Tally, in_window: list[tuple[int, tuple]]) -> bool:
        """Whether the group of ``device`` that grew most between the window's first and last step ends (two
        groupings) is the top group of an alert already raised: a leak that keeps growing is reported once, and
        its later checks cost two groupings, not an attribution over the window."""
        first, last = self._groups_at(*in_window[0]), self._groups_at(*in_window[-1])
        grown = [(first.get(key, (0, 0))[0] - counts[0], site_of(key[1], key[2], key[3]), key[2], key[4], key[6])
                 for key, counts in last.items() if key[0] == device]
        if not grown:
            return False
        shrink, *top = min(grown)  # the most growth; of equal ones the first site, as attribute() sorts them
        return shrink < 0 and (tuple(top),) in tally.alerted

    def _report_host_growth(self, found: Trend, step: int) -> None:
        engine_growth = sum(trend(list(t.window.steps), list(t.window.values)).slope for t in self._tallies.values()
                            if t.window is not None and len(t.window.values) >= 2)
        if self._host_alerted or engine_growth >= 0.8 * found.slope:
            return  # engine tensors explain it: the device leak alert says more
        self._host_alerted = True
        lines = self._host.attribution(step) if self._host is not None else []
        where = f"; fastest-growing Python allocation site: {lines[0]['site']}" if lines else (
            "; switch on host_attribution=True to attribute it (tracemalloc)")
        self.alerts.write(Alert(kind=names.LEAK, severity="warning", subject="host RSS", step=step,
                                message=f"process RSS grows {format_bytes(found.slope)}/step over steps "
                                        f"{found.steps[0]}–{found.steps[-1]}, outside the engine's tensors{where}",
                                evidence={"device": tag_names.HOST_DEVICE, names.BYTES_PER_STEP: found.slope,
                                          names.STEPS: list(found.steps), names.RSS_BYTES: list(found.values),
                                          "engine_bytes_per_step": engine_growth,
                                          "python_sites": lines}))

    def _write(self, snapshot: MemorySnapshot) -> str | None:
        try:
            path = write_snapshot(self.run_dir, snapshot)
        except OSError as error:
            self._report_once("snapshot", f"cannot write a memory snapshot under {self.run_dir}: {error}")
            return None
        self.snapshots.append(path)
        return path

    def _process_safely(self) -> None:
        try:
            self._process()
        except Exception as error:  # noqa: BLE001 - the OOM must propagate as the engine raised it
            self._report_once("process", f"processing the last steps failed: {type(error).__name__}: {error}")

    def _flush(self) -> None:
        try:
            self.writer.flush()
        except Exception as error:  # noqa: BLE001 - the OOM must propagate as the engine raised it
            self._report_once("flush", f"flushing the writer failed: {type(error).__name__}: {error}")

    def _report_once(self, what: str, message: str) -> None:
        if what not in self._failures:
            self._failures.add(what)
            print(f"flowscope.memory: {message}; further failures of this kind are not reported", file=sys.stderr)


def _phase_now() -> str:
    """The snapshot phase of what runs now: training with gradients on, an evaluation without."""
    return TRAINING if is_grad_enabled() else EVALUATION


def _capture_id(path: str | None) -> str | None:
    if path is None:
        return None
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.split(".", 1)[0]
