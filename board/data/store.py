"""The log directory as the board sees it: runs discovered and tailed in the background, queried by name."""
from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from board.data import cache
from board.data.cache import run_cache_dir
from board.data.discovery import RunLocation, discover_runs, run_group
from board.data.histograms import HistogramPoint
from board.data.plugin_data import Stored
from board.data.run_slots import RunSlot, RunSlots, creation_key
from board.data.subruns import folded_subruns
from board.data.run import RunState, RunSummary
from board.data.series import ScalarColumns, ScalarSeries

log = logging.getLogger(__name__)
PARALLEL_MIN_BYTES = 4 << 20  # below this, starting a worker process costs more than it saves


def _unread_bytes(run: RunLocation, cache_root: Path, logdir: Path) -> int:
    """Bytes of the run's event files; 0 when a cache entry covers them (nothing to decode). The entry's content
    is checked when the run maps it (an entry that no longer matches is then decoded in this process)."""
    if cache.valid_manifest(run_cache_dir(cache_root, logdir, run.name), run.path, check_content=False) is not None:
        return 0
    total = 0
    for name in run.event_files:
        try:
            total += (run.path / name).stat().st_size
        except OSError:
            continue
    return total


def _file_marks(location: RunLocation) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of each event file: what a failed run waits to see change before it is read again."""
    marks = []
    for name in location.event_files:
        try:
            stat = (location.path / name).stat()
        except OSError:
            continue
        marks.append((name, stat.st_size, stat.st_mtime_ns))
    return tuple(marks)


def _forward_names(process: subprocess.Popen, done: queue.SimpleQueue) -> None:
    """Puts each run name a worker reports done (one JSON string a line) into `done`, then None at its end."""
    try:
        for line in process.stdout:  # type: ignore[union-attr]
            try:
                name = json.loads(line)
            except ValueError:
                continue
            if isinstance(name, str):
                done.put(name)
    finally:
        done.put(None)


class UnknownSeries(KeyError):
    """A run or tag that the log directory does not hold (the API answers 404)."""

    def __str__(self) -> str:
        return str(self.args[0])


class LogdirStore:
    """Thread-safe: one refresher thread writes, any number of request threads read snapshots."""

    def __init__(self, logdir: Path, reload_interval: float = 5.0, cache_root: Path | None = None,
                 workers: int | None = None) -> None:
        """`cache_root` None: no on-disk cache (and no worker processes). `workers`: processes that decode
        new runs in parallel on the first pass (default: one per CPU)."""
        self.logdir = Path(logdir)
        self.reload_interval = reload_interval
        self.cache_root = cache_root
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self._runs: dict[str, RunState] = {}
        self._summaries: dict[str, RunSummary] = {}
        self._folded: dict[str, str] = {}  # hparams sub-run → the run it is shown as part of
        self._subruns: dict[str, tuple[str, ...]] = {}  # the inverse: run → its folded sub-runs
        self._lock = threading.RLock()
        self._run_slots = RunSlots()  # each run's place in the colour order (see `run_slot`)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0  # completed passes over the log directory
        self.generation = 0  # grows whenever what a run holds changes (a run's summary, a run gone, the folding)
        self.last_refresh_seconds: float | None = None
        self.first_load_seconds: float | None = None  # the first pass: opening the directory

    # ---- refreshing -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """One pass: discover runs, drop deleted ones, read what each run's files gained.

        Each run is read on its own: one that raises is kept (with what it had) and listed with a warning, the
        others are read all the same, and it is tried again only once its files change."""
        started = time.perf_counter()
        locations = discover_runs(self.logdir)
        with self._lock:
            for name in set(self._runs) - set(locations):
                del self._runs[name]
                self._summaries.pop(name, None)
                self.generation += 1
        published: set[str] = set()

        def publish(name: str) -> None:
            if name in locations and name not in published:
                published.add(name)
                self._publish(name, locations[name])

        # each run a worker has decoded is mapped and served at once, while the workers decode the others
        self._decode_in_workers([locations[name] for name in sorted(set(locations) - set(self._runs))
                                 if locations[name].event_files], publish)
        for name in sorted(locations):
            publish(name)
        folded = folded_subruns({name: set(run.plugin_data.values) for name, run in self._runs.items()})
        subruns: dict[str, list[str]] = {}
        for sub, parent in sorted(folded.items()):
            subruns.setdefault(parent, []).append(sub)
        with self._lock:
            if folded != self._folded:
                self.generation += 1
            self._folded, self._subruns = folded, {parent: tuple(subs) for parent, subs in subruns.items()}
        self._run_slots.assign({name: creation_key(location) for name, location in locations.items()
                                if name not in folded})
        self.last_refresh_seconds = time.perf_counter() - started
        if self.refreshes == 0:
            self.first_load_seconds = self.last_refresh_seconds
        self.refreshes += 1

    def _publish(self, name: str, location: RunLocation) -> None:
        """Read what the run's files gained and make it visible to requests."""
        run = self._refresh_run(self._runs.get(name), location)
        if run is None:
            return
        summary = run.summary()
        with self._lock:
            previous = self._summaries.get(name)
            self._runs[name] = run
            self._summaries[name] = summary
            if summary != previous:  # every record read changes it (points, bytes)
                self.generation += 1
        for line in set(summary.warnings) - set(previous.warnings if previous else ()):
            log.warning("run %s: %s", name, line)  # once per warning, not once per pass

    def _refresh_run(self, run: RunState | None, location: RunLocation) -> RunState | None:
        """The run after reading what its files gained; None when it vanished while being read."""
        if run is not None and run.failure is not None and _file_marks(location) == run.failed_marks:
            run.directory_problem = location.problem
            return run  # it failed on these very bytes: wait for them to change
        try:
            if run is None:
                cache_dir = run_cache_dir(self.cache_root, self.logdir, location.name) if self.cache_root else None
                run = RunState(location.name, run_group(location.name), location.path, cache_dir)
            run.directory_problem = location.problem
            run.refresh(location.event_files, self._lock)
            run.save_cache_if_grown()
        except Exception as error:  # NOTE: one run's failure must not stop the others from loading
            if isinstance(error, FileNotFoundError) and not location.path.exists():
                return None  # the run was deleted mid-read; the next pass no longer finds it
            if run is None:  # it failed before reading anything
                run = RunState(location.name, run_group(location.name), location.path)
                run.directory_problem = location.problem
            if run.failure is None:
                log.debug("run %s failed", location.name, exc_info=error)
            run.failure = f"{type(error).__name__}: {error}"
            run.failed_marks = _file_marks(location)
        else:
            run.failure = None
        return run

    def _decode_in_workers(self, new_runs: list[RunLocation], decoded: Callable[[str], None]) -> None:
        """Decode large new runs into the cache in worker processes; `decoded(name)` is called (in this thread)
        as each run is done, so that it is mapped while the workers go on; returns when they all exited.

        Besides using every core, this keeps the decoding's short-lived objects out of the server process,
        whose memory then holds little more than the mapped columns.
        """
        if self.cache_root is None or self.workers < 1 or not new_runs:
            return
        sizes = {run.name: _unread_bytes(run, self.cache_root, self.logdir) for run in new_runs}
        sizes = {name: size for name, size in sizes.items() if size > 0}  # the rest is mapped from the cache
        if sum(sizes.values()) < PARALLEL_MIN_BYTES:
            return
        groups: list[list[str]] = [[] for _ in range(min(self.workers, len(sizes)))]
        loads = [0] * len(groups)
        for name in sorted(sizes, key=sizes.__getitem__, reverse=True):  # largest first onto the lightest worker
            lightest = loads.index(min(loads))
            groups[lightest].append(name)
            loads[lightest] += sizes[name]
        command = [sys.executable, "-m", "board.data.worker", str(self.logdir), str(self.cache_root)]
        processes = []
        done: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        running = 0  # workers whose names are being forwarded
        try:
            for group in groups:
                process = subprocess.Popen([*command, *group], stdout=subprocess.PIPE)
                processes.append(process)
                threading.Thread(target=_forward_names, args=(process, done), daemon=True).start()
                running += 1
        except (OSError, RuntimeError) as error:  # no process or thread to spare: the pass reads the rest itself
            log.warning("cannot start a decoding worker: %s", error)
        while running:
            name = done.get()
            if name is None:
                running -= 1
            else:
                decoded(name)
        for process in processes:
            if process.wait() != 0:  # the pass reads those runs itself
                log.warning("a decoding worker failed (exit %s)", process.returncode)

    def start(self) -> None:
        """Refresh now and then every `reload_interval` seconds, in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="flowscope-board-reload", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception:  # NOTE: a bad pass must not end live updates; the next pass retries
                log.exception("refreshing %s failed", self.logdir)
            self._stop.wait(self.reload_interval)

    # ---- reading --------------------------------------------------------------------------------------
    @property
    def logdir_exists(self) -> bool:
        return self.logdir.is_dir()

    def runs(self) -> list[RunSummary]:
        """Every run but the hparams sub-runs, which are shown as part of their parent (see `subruns`)."""
        with self._lock:
            return [self._folded_summary(name) for name in sorted(self._summaries) if name not in self._folded]

    def run_names(self) -> list[str]:
        """The names `runs()` lists, without building their summaries."""
        with self._lock:
            return [name for name in sorted(self._summaries) if name not in self._folded]

    def _folded_summary(self, name: str) -> RunSummary:
        """The run's summary with its folded sub-runs' files, points and warnings added in."""
        own = self._summaries[name]
        subs = [sub for sub in self._subruns.get(name, ()) if sub in self._summaries]
        if not subs:
            return own
        parts = [own, *(self._summaries[sub] for sub in sorted(subs))]
        steps = [part.last_step for part in parts if part.last_step is not None]
        updates = [part.last_update for part in parts if part.last_update is not None]
        return replace(own, last_step=max(steps) if steps else None, last_update=max(updates) if updates else None,
                       scalar_tags=len({tag for member in self._family(name) for tag in member.scalars}),
                       points=sum(part.points for part in parts), size_bytes=sum(part.size_bytes for part in parts),
                       corrupt_records=sum(part.corrupt_records for part in parts),
                       superseded_points=sum(part.superseded_points for part in parts),
                       files=sum(part.files for part in parts),
                       warnings=own.warnings + tuple(f"{sub}: {line}" for sub in sorted(subs)
                                                     for line in self._summaries[sub].warnings))

    def run_slot(self, run: str) -> RunSlot:
        """The run's place in the colour order: kept while the board runs, the same for a new board on the same
        log directory (groups by creation, ranks by number; see `board.data.run_slots`)."""
        return self._run_slots.slot(run)

    def folded(self) -> dict[str, str]:
        """hparams sub-run → the run it is folded into."""
        with self._lock:
            return dict(self._folded)

    def _family(self, run: str) -> list[RunState]:
        """The run and the sub-runs folded into it (its own data first)."""
        own = self._run(run)
        subs = self._subruns.get(run)
        if not subs:
            return [own]
        return [own, *(state for state in map(self._runs.get, subs) if state is not None)]

    def scalar_tags(self, run: str) -> list[str]:
        with self._lock:
            return sorted({tag for member in self._family(run) for tag in member.scalars})

    def histogram_tags(self, run: str) -> list[str]:
        with self._lock:
            return sorted(self._run(run).histograms)

    def all_scalar_tags(self) -> dict[str, list[str]]:
        """Run name → its scalar tags (with its folded sub-runs' tags), for every run."""
        with self._lock:
            return {name: sorted({tag for member in self._family(name) for tag in member.scalars})
                    for name in sorted(self._runs) if name not in self._folded}

    def all_histogram_tags(self) -> dict[str, list[str]]:
        with self._lock:
            return {name: sorted(run.histograms) for name, run in sorted(self._runs.items())
                    if name not in self._folded}

    def plugin_values(self, run: str, plugin: str) -> dict[str, list[Stored]]:
        """Tag → values of one plugin in a run and its folded sub-runs (copies of the lists, file order)."""
        with self._lock:
            merged: dict[str, list[Stored]] = {}
            for member in self._family(run):
                for tag, values in member.plugin_data.tags(plugin).items():
                    merged.setdefault(tag, []).extend(values)
            return merged

    def plugin_tag_counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """Run (folded) → plugin → tag → number of values, for every run's event-file plugin data."""
        with self._lock:
            counts: dict[str, dict[str, dict[str, int]]] = {}
            for name in sorted(self._runs):
                run = self._runs[name]
                target = counts.setdefault(self._folded.get(name, name), {})
                for plugin, tags in run.plugin_data.values.items():
                    for tag, values in tags.items():
                        per_plugin = target.setdefault(plugin, {})
                        per_plugin[tag] = per_plugin.get(tag, 0) + len(values)
            return counts

    def run_path(self, run: str) -> Path:
        with self._lock:
            return self._run(run).path

    # NOTE: the two scalar reads take no lock: a series' published snapshot is immutable, and a lock that the
    # refresher holds while it waits for the GIL made 200 concurrent readers queue behind it (bench/board_load.py).
    def scalars(self, run: str, tag: str) -> tuple[ScalarColumns, int]:
        """Every point of one series and its revision (see `ScalarSeries`), as last published by a refresh."""
        return self._scalar_series(run, tag).snapshot()

    def scalar_version(self, run: str, tag: str) -> tuple[int, int]:
        """(revision, length) of a series, without touching its columns."""
        columns, revision = self._scalar_series(run, tag).snapshot()
        return revision, len(columns)

    def histograms(self, run: str, tag: str) -> list[HistogramPoint]:
        with self._lock:
            series = self._run(run).histograms.get(tag)
            if series is None:
                raise UnknownSeries(f"run {run!r} has no histogram tag {tag!r}")
            return list(series.points)

    def _run(self, run: str) -> RunState:
        state = self._runs.get(run)
        if state is None:
            raise UnknownSeries(f"unknown run {run!r}")
        return state

    def _scalar_series(self, run: str, tag: str) -> ScalarSeries:
        series = self._run(run).scalars.get(tag)
        if series is None:
            series = next((member.scalars[tag] for member in self._family(run) if tag in member.scalars), None)
        if series is None:
            raise UnknownSeries(f"run {run!r} has no scalar tag {tag!r}")
        return series
