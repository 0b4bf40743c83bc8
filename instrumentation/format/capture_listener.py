"""``<run>/plugins/profile/capture_listener.json``: a training process that answers capture requests says so.

Written by ``OnDemandCapture.start()`` as ``{"version", "pid", "host", "started_at"}`` (``started_at``: Unix time the
listening began), its modification time refreshed at each request check (the heartbeat, at most every
``check_interval_ms``), removed by ``close()``. The board reads it before writing a request: no file means no
process is listening (the run finished, or trains without on-demand capture); a file left by a process that died
without closing is recognised by its pid (same host) or its stale heartbeat (another host)."""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from instrumentation.format.confined import open_regular, write_atomic
from instrumentation.format.trace import FORMAT_VERSION, request_path

LISTENER_NAME = "capture_listener.json"


@dataclass(frozen=True, slots=True)
class Listener:
    """The process listening for a run's capture requests; ``heartbeat`` is the file's modification time."""

    pid: int
    host: str
    started_at: float
    heartbeat: float


def listener_path(run_dir: str | os.PathLike[str]) -> str:
    return request_path(run_dir, LISTENER_NAME)


def write_listener(run_dir: str | os.PathLike[str]) -> str:
    """Announce this process as the run's listener (replacing a file a dead one left); returns the path."""
    record = {"version": FORMAT_VERSION, "pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time()}
    path = listener_path(run_dir)
    write_atomic(path, json.dumps(record).encode(), run_dir)
    return path


def read_listener(run_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> Listener | None:
    """The run's listener, or None when there is none (no file). A file that is not valid JSON of this shape, or
    that cannot be opened as ``root`` allows, raises ``ValueError``/``OSError``."""
    try:
        with open_regular(listener_path(run_dir), root) as handle:
            heartbeat = os.fstat(handle.fileno()).st_mtime
            record = json.loads(handle.read())
    except FileNotFoundError:
        return None
    try:
        return Listener(int(record["pid"]), str(record["host"]), float(record["started_at"]), heartbeat)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{LISTENER_NAME}: not a listener record ({error})") from error
