"""Profile captures in a log directory (flowscope's and torch.profiler's), loaded into columns with a small cache."""
from __future__ import annotations

import logging
import os
import socket
import stat as stat_module
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from board.data.discovery import ROOT_RUN
from instrumentation.format import trace as fmt
from instrumentation.format import trace_sidecar
from instrumentation.format.capture_listener import read_listener
from instrumentation.format.confined import read_regular
from instrumentation.format.trace_columns import TraceColumns, columns_from_trace

CACHED_TRACES = 4
STALE_HEARTBEAT_S = 300.0  # a listener on another host not heard from for this long is taken for gone
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Capture:
    """One trace file. ``key`` identifies it in the UI; files are only ever found through ``find_captures``, and
    opened only below ``root`` (the resolved log directory), never through a link leading outside it."""

    run: str         # relative path of the run directory ("." for the log directory itself)
    capture_id: str  # flowscope: the capture directory's name; torch: the file name
    path: Path
    source: str      # "flowscope" | "torch"
    size_bytes: int
    mtime: float
    root: Path

    @property
    def key(self) -> str:
        return f"{self.run}\x1f{self.capture_id}\x1f{self.path.name}"

    def read_bytes(self) -> bytes:
        """The trace file's bytes (for download), opened as ``root`` allows."""
        return read_regular(self.path, self.root)

    @property
    def label(self) -> str:
        suffix = "" if self.source == "flowscope" else " (torch.profiler)"
        return f"{self.run} · {self.capture_id}{suffix}"


def find_captures(logdir: Path) -> dict[str, Capture]:
    """Every capture under ``logdir`` by key, newest first. Links leading outside the log directory are skipped."""
    root = Path(logdir).resolve()
    found: list[Capture] = []
    if not root.is_dir():
        return {}
    for directory, subdirectories, files in os.walk(root, followlinks=False):
        here = Path(directory)
        for name in files:
            if not fmt.is_trace_file(name):
                continue
            path = here / name
            try:
                stat = path.stat()
                if not stat_module.S_ISREG(stat.st_mode) or not path.resolve().is_relative_to(root):
                    continue
            except OSError:
                continue
            if name.endswith(fmt.TRACE_SUFFIX) and fmt.is_capture_id(here.name) and here.parent.name == "profile" \
                    and here.parent.parent.name == "plugins":
                run_dir, capture_id, source = here.parent.parent.parent, here.name, "flowscope"
            elif name.endswith(fmt.TORCH_TRACE_SUFFIXES):
                run_dir, capture_id, source = here, name, "torch"
            else:
                continue
            run = run_dir.relative_to(root).as_posix()
            found.append(Capture(ROOT_RUN if run == "." else run, capture_id, path, source, stat.st_size, stat.st_mtime,
                                 root))
    found.sort(key=lambda c: (-c.mtime, c.run, c.capture_id))
    return {capture.key: capture for capture in found}


def load_sidecar(capture: Capture) -> TraceColumns | None:
    """A flowscope capture's columns from its sidecar; None (parse the JSON) when it has none or it is invalid."""
    if capture.source != "flowscope":
        return None
    try:
        return trace_sidecar.read_sidecar(capture.path, capture.root)
    except FileNotFoundError:
        return None
    except (trace_sidecar.SidecarError, OSError) as error:
        log.warning("ignoring the columns sidecar of %s: %s", capture.path, error)
        return None


class TraceCache:
    """The last few parsed captures, keyed by path, size and mtime (a rewritten file is parsed again)."""

    def __init__(self, size: int = CACHED_TRACES, use_sidecar: bool = True) -> None:
        self.size = size
        self.use_sidecar = use_sidecar
        self._entries: OrderedDict[tuple[str, int, float], TraceColumns] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, capture: Capture) -> TraceColumns:
        key = (str(capture.path), capture.size_bytes, capture.mtime)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        columns = load_sidecar(capture) if self.use_sidecar else None
        if columns is None:
            columns = columns_from_trace(fmt.read_trace(capture.path, capture.root))
        with self._lock:
            self._entries[key] = columns
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return columns


class CaptureRequestsDisabled(PermissionError):
    """The board may not write into the log directory (``--read-only``, or no token on a non-loopback host)."""


class NotListening(RuntimeError):
    """No training process answers the run's capture requests (the run finished, or never listened)."""


def not_listening_reason(run_dir: Path, logdir: Path, now: float | None = None) -> str | None:
    """Why no process would take a capture request of ``run_dir`` now, or None when one is listening (or the
    listener file cannot be read: then the request is written and its state followed as usual)."""
    try:
        listener = read_listener(run_dir, logdir)
    except (OSError, ValueError) as error:
        log.warning("cannot read the capture listener of %s: %s", run_dir, error)
        return None
    if listener is None:
        return ("no training process is listening to this run: it has finished, or it trains without on-demand "
                "capture (watch(..., capture_requests=True) or profile(..., on_demand=True))")
    if listener.host == socket.gethostname():
        if _same_process(listener.pid, listener.started_at):
            return None
        return (f"its training process (pid {listener.pid}) has ended without closing its capture listener "
                "(killed or crashed)")
    age_s = (time.time() if now is None else now) - listener.heartbeat
    if age_s <= STALE_HEARTBEAT_S:
        return None
    return (f"its training process (pid {listener.pid} on {listener.host}) last checked for requests "
            f"{age_s / 60:.0f} min ago: it has ended")


def _same_process(pid: int, started_at: float) -> bool:
    """Whether ``pid`` is alive and began no later than ``started_at`` (not a later process given the same pid)."""
    import psutil

    try:
        return psutil.Process(pid).create_time() <= started_at + 1.0
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.Error:  # alive but not ours to inspect
        return True


def request_capture(run_dirs: dict[str, Path], run: str, steps: int, allowed: bool, logdir: Path
                    ) -> fmt.CaptureRequest:
    """The Capture button: ask the process writing ``run`` for ``steps`` steps.

    ``run`` is looked up among the known run directories (never joined onto a path); the only file written is
    ``<run>/plugins/profile/capture_request.json`` (see ``instrumentation.format.trace``), never through a link
    leading outside ``logdir``. Raises ``NotListening`` (and writes nothing) when no process listens to the run."""
    if not allowed:
        raise CaptureRequestsDisabled("this board is read-only: capture requests are disabled")
    run_dir = run_dirs.get(run)
    if run_dir is None:
        raise KeyError(f"unknown run {run!r}")
    reason = not_listening_reason(run_dir, logdir)
    if reason is not None:
        raise NotListening(f"{run}: {reason}")
    return fmt.write_capture_request(run_dir, int(steps), root=logdir)
