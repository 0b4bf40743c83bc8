"""The Memory page's data: allocator timelines from `mem/` scalars, snapshots and memory alerts (no Dash here)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from board.data.downsample import DEFAULT_POINTS, envelope_indices
from board.data.measured import unmeasured_before
from board.data.store import LogdirStore, UnknownSeries
from instrumentation.format import tags as tag_names
from instrumentation.format.alert_names import DEVICE, MEMORY_KINDS, SNAPSHOT, STEPS
from instrumentation.format.alerts import ALERTS_RELPATH, Alert, AlertReader
from instrumentation.format.memory_categories import CATEGORIES
from instrumentation.format.memory_snapshot import (PEAK, MemorySnapshot, SnapshotFile, SnapshotHeader, list_snapshots,
                                                    read_snapshot, read_snapshot_header)


@dataclass(frozen=True, slots=True)
class Sampling:
    """How a run's memory figures were logged when not at every step: ``(from_step, interval)`` pairs, one step in
    ``interval`` from ``from_step`` on (the tracker's pacer's decisions, or the gaps seen); each logged peak is the
    highest since the previous logged step."""

    intervals: tuple[tuple[int, int], ...]

    def describe(self) -> str:
        spans = ", ".join(f"every {interval} steps from step {start}" if interval > 1
                          else f"every step from step {start}" for start, interval in self.intervals)
        return (f"memory logged {spans} (markers at the logged steps; each peak is the highest since the previous "
                "one; the dotted line only joins them)")


@dataclass(frozen=True, slots=True)
class MemoryTimeline:
    """One device of one run on the step axis: `allocated` at each step's end, the step's `peak` (the highest since
    the previous logged step), and the bytes per category at that peak (`bands`, which stack up to `peak`);
    downsampled together for display. `unmeasured_before[i]`: steps between point i-1 and i were not logged (a
    thinned log); `limit_steps`/`limit`: the allocator limit from each step it was logged at (NaN: none)."""

    device: str
    steps: np.ndarray
    allocated: np.ndarray
    peak: np.ndarray
    bands: dict[str, np.ndarray]
    reserved: np.ndarray | None = None  # a device with a pool: bytes held from it at step end (None: = allocated)
    unmeasured_before: np.ndarray | None = None  # bool per point (None: every step logged)
    sampling: Sampling | None = None
    limit_steps: np.ndarray | None = None
    limit: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class SnapshotMark:
    """A snapshot on its device's chart: at its step, at its allocated bytes."""

    capture_id: str
    step: int
    allocated_bytes: int
    reason: str
    phase: str


@dataclass(frozen=True, slots=True)
class AlertMark:
    """A memory alert on its device's chart: its step, and the window of steps its evidence covers (a leak)."""

    kind: str
    step: int
    first_step: int | None
    last_step: int | None
    snapshot: str | None
    label: str


def run_dir(store: LogdirStore, run: str) -> Path:
    return store.logdir / run if run != "." else store.logdir


def memory_runs(store: LogdirStore) -> list[str]:
    """Runs with allocator scalars or memory snapshots."""
    tags = store.all_scalar_tags()
    return [run for run, names in tags.items()
            if any(t.startswith(tag_names.MEMORY) for t in names) or list_snapshots(run_dir(store, run))]


def devices(store: LogdirStore, run: str) -> list[str]:
    """The run's allocator devices, the host's ("cpu") first, then the accelerators by name."""
    try:
        tags = store.scalar_tags(run)
    except UnknownSeries:
        return []
    found = {device for t in tags if (device := tag_names.memory_device(t)) not in (None, tag_names.HOST_DEVICE)}
    return sorted(found, key=lambda device: (device != "cpu", device))


def device_title(run: str, device: str) -> str:
    """A timeline's title: the host's allocator and each device's, shown side by side."""
    side = "host" if device == "cpu" else "device"
    return f"{run} · {side} {device}: peak per step by category"


def _values_at(store: LogdirStore, run: str, tag: str, steps: np.ndarray) -> np.ndarray:
    """The tag's values at `steps` (0 where it has no point)."""
    try:
        columns, _ = store.scalars(run, tag)
    except UnknownSeries:
        return np.zeros(len(steps))
    out = np.zeros(len(steps))
    where = np.searchsorted(columns.steps, steps)
    found = (where < len(columns.steps)) & (columns.steps[np.minimum(where, len(columns.steps) - 1)] == steps)
    out[found] = columns.values[where[found]]
    return out


def sampling(store: LogdirStore, run: str, steps: np.ndarray) -> Sampling | None:
    """How `steps` (the logged ones, ascending) were thinned: the intervals the tracker's pacer logged (its
    `perf/interval/memory`) from the first one above 1, else the first gap in the steps; None when every step was
    logged."""
    gaps = np.diff(np.asarray(steps, dtype=np.int64))
    skipped = np.flatnonzero(gaps > 1)
    if len(skipped) == 0:
        return None
    try:
        columns, _ = store.scalars(run, tag_names.pace_tag(tag_names.INTERVAL, tag_names.MEMORY_OBSERVER))
        decided = [(int(step), int(value)) for step, value in zip(columns.steps, columns.values) if np.isfinite(value)]
    except UnknownSeries:
        decided = []
    intervals: list[tuple[int, int]] = []
    for step, interval in decided:
        if (intervals or interval > 1) and (not intervals or intervals[-1][1] != interval):
            intervals.append((step, interval))
    first_gap = int(steps[skipped[0]])
    if not intervals:
        return Sampling(((first_gap, int(gaps[skipped[0]])),))
    # NOTE: the pacer writes its interval with the batch it decided in, after the steps it already thinned
    return Sampling(((min(first_gap, intervals[0][0]), intervals[0][1]), *intervals[1:]))


def _limit(store: LogdirStore, run: str, device: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    try:
        columns, _ = store.scalars(run, tag_names.memory_tag(device, tag_names.LIMIT_BYTES))
    except UnknownSeries:
        return None, None
    return columns.steps, columns.values


def timeline(store: LogdirStore, run: str, device: str, points: int = DEFAULT_POINTS) -> MemoryTimeline:
    try:
        peak_columns, _ = store.scalars(run, tag_names.memory_tag(device, tag_names.PEAK_BYTES))
    except UnknownSeries:
        empty = np.zeros(0)
        return MemoryTimeline(device, empty.astype(np.int64), empty, empty, {})
    keep = envelope_indices(peak_columns.steps.astype(np.float64), np.nan_to_num(peak_columns.values), points)
    keep = np.asarray(keep)
    steps = peak_columns.steps[keep]
    thinned = sampling(store, run, peak_columns.steps)
    unmeasured = unmeasured_before(peak_columns.steps, keep) if thinned is not None else None
    limit_steps, limit = _limit(store, run, device)
    tags = set(store.scalar_tags(run))
    band_tags = {c: tag for c in CATEGORIES if (tag := tag_names.category_tag(device, c)) in tags}
    bands = {c: _values_at(store, run, tag, steps) for c, tag in band_tags.items()}
    allocated_tag = tag_names.memory_tag(device, tag_names.ALLOCATED_BYTES)
    allocated = _values_at(store, run, allocated_tag, steps)
    reserved_tag = tag_names.memory_tag(device, tag_names.RESERVED_BYTES)
    reserved = _values_at(store, run, reserved_tag, steps) if reserved_tag in tags else None
    if reserved is not None and not (reserved > allocated).any():
        reserved = None  # no pool (the CPU): reserved is what is allocated
    return MemoryTimeline(device, steps, allocated, peak_columns.values[keep], bands, reserved, unmeasured, thinned,
                          limit_steps, limit)


def snapshots(store: LogdirStore, run: str) -> list[SnapshotFile]:
    return list_snapshots(run_dir(store, run))


_headers: dict[tuple[str, float], SnapshotHeader | None] = {}
_headers_lock = threading.Lock()


def snapshot_headers(store: LogdirStore, run: str) -> list[tuple[SnapshotFile, SnapshotHeader | None]]:
    """The run's snapshots, oldest first, each with its header (None if unreadable); a file is read once (a
    snapshot is written whole, by rename, and never changes)."""
    found = []
    for snapshot in snapshots(store, run):
        key = (snapshot.path, snapshot.mtime)
        with _headers_lock:
            known = key in _headers
            header = _headers.get(key)
        if not known:
            header = read_snapshot_header(snapshot.path, root=store.logdir)
            with _headers_lock:
                if len(_headers) > 4096:
                    _headers.clear()
                _headers[key] = header
        found.append((snapshot, header))
    return found


def highest_peaks(headers: list[SnapshotHeader | None]) -> dict[str, SnapshotHeader]:
    """device → its "peak" snapshot of most allocated bytes (the latest of equal ones): the tracker writes a new one
    each time the peak grows, so earlier ones are the state at lower peaks."""
    found: dict[str, SnapshotHeader] = {}
    for header in headers:
        if header is not None and header.reason == PEAK:
            known = found.get(header.device)
            if known is None or header.allocated_bytes >= known.allocated_bytes:
                found[header.device] = header
    return found


class SnapshotCache:
    """Parsed snapshots by (path, mtime): a snapshot is read once however often the page asks for it."""

    def __init__(self, max_entries: int = 8) -> None:
        self._entries: OrderedDict[tuple[str, float], MemorySnapshot] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def load(self, store: LogdirStore, run: str, capture_id: str) -> tuple[SnapshotFile, MemorySnapshot] | None:
        """The snapshot `capture_id` of `run`; None when there is no such snapshot (ValueError if unreadable)."""
        found = [f for f in snapshots(store, run) if f.capture_id == capture_id]
        if not found:
            return None
        key = (found[0].path, found[0].mtime)
        with self._lock:
            cached = self._entries.get(key)
        if cached is None:
            cached = read_snapshot(found[0].path, root=store.logdir)
            with self._lock:
                self._entries[key] = cached
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        return found[0], cached


def memory_alerts(store: LogdirStore, run: str) -> list[Alert]:
    """The run's oom/leak/fragmentation alerts, newest first."""
    alerts = AlertReader(run_dir(store, run) / ALERTS_RELPATH, root=store.logdir).read()
    return sorted((a for a in alerts if a.kind in MEMORY_KINDS), key=lambda a: (-a.step, -a.wall_time))


def snapshot_marks(store: LogdirStore, run: str, device: str) -> list[SnapshotMark]:
    """The run's readable snapshots of `device`, oldest first, as chart marks."""
    return [SnapshotMark(f.capture_id, header.step, header.allocated_bytes, header.reason, header.phase)
            for f, header in snapshot_headers(store, run) if header is not None and header.device == device]


def alert_marks(alerts: list[Alert], device: str) -> list[AlertMark]:
    """The memory alerts of `device` (the host RSS's excluded: it is not on an allocator chart) as chart marks; a
    leak's window is the steps of its evidence."""
    marks = []
    for alert in alerts:
        if alert.evidence.get(DEVICE, device) != device:
            continue
        window = [int(s) for s in alert.evidence.get(STEPS) or [] if isinstance(s, (int, float))]
        snapshot = alert.evidence.get(SNAPSHOT)
        marks.append(AlertMark(alert.kind, alert.step, min(window) if window else None,
                               max(window) if window else None, str(snapshot) if snapshot else None,
                               f"{alert.kind} at step {alert.step}" + (f" (steps {min(window)}–{max(window)})"
                                                                        if window else "")))
    return marks


@dataclass(frozen=True, slots=True)
class Treemap:
    """Flat treemap nodes: module path → sub-modules → category leaves (values in bytes, parents summed)."""

    ids: list[str]
    labels: list[str]
    parents: list[str]
    values: list[int]


def module_treemap(snapshot: MemorySnapshot) -> Treemap:
    leaves: dict[tuple[str, str], int] = {}
    for block in snapshot.blocks:
        leaves[(block.module or "(top level)", block.category or "?")] = leaves.get(
            (block.module or "(top level)", block.category or "?"), 0) + block.bytes
    totals: dict[str, int] = {}
    for (module, _), nbytes in leaves.items():
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            node = ".".join(parts[:depth])
            totals[node] = totals.get(node, 0) + nbytes
    root = f"{snapshot.device} ({snapshot.reason}, step {snapshot.step})"
    ids, labels, parents, values = [root], [root], [""], [sum(totals[n] for n in totals if "." not in n)]
    for node in sorted(totals):
        ids.append(node)
        labels.append(node.rsplit(".", 1)[-1])
        parents.append(node.rsplit(".", 1)[0] if "." in node else root)
        values.append(totals[node])
    for (module, category), nbytes in sorted(leaves.items()):
        ids.append(f"{module}|{category}")
        labels.append(category)
        parents.append(module)
        values.append(nbytes)
    return Treemap(ids, labels, parents, values)
