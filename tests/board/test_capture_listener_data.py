"""The board asks a run for a capture only when a process listens: a finished run, a dead process (same host: by
pid) or a silent one (another host: by heartbeat) is said at once, and nothing is written."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from board.data.profile_captures import STALE_HEARTBEAT_S, NotListening, not_listening_reason, request_capture
from instrumentation.format import trace as fmt
from instrumentation.format.capture_listener import listener_path, write_listener
from instrumentation.profiler import OnDemandCapture


def _listener(run_dir: Path, **fields) -> None:
    path = Path(listener_path(run_dir))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "started_at": time.time(), **fields}))


def test_a_run_without_listener_is_refused_at_once_and_nothing_is_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "finished"
    run_dir.mkdir()
    OnDemandCapture(run_dir).start().close()  # a run that listened, then ended
    with pytest.raises(NotListening, match="finished: no training process is listening to this run"):
        request_capture({"finished": run_dir}, "finished", 5, True, tmp_path)
    assert not os.path.exists(fmt.request_path(run_dir))


def test_a_live_process_on_this_host_is_listening_and_gets_the_request(tmp_path: Path) -> None:
    run_dir = tmp_path / "live"
    run_dir.mkdir()
    write_listener(run_dir)  # this process
    assert not_listening_reason(run_dir, tmp_path) is None
    request = request_capture({"live": run_dir}, "live", 3, True, tmp_path)
    assert fmt.read_capture_status(run_dir).state == "pending" and request.steps == 3


def test_a_dead_process_on_this_host_is_recognised_by_its_pid(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _listener(tmp_path / "crashed", pid=int(child.stdout), host=socket.gethostname())
    assert "pid" in not_listening_reason(tmp_path / "crashed", tmp_path)
    # a pid given since to a process that began after the listener started is not the listener either
    _listener(tmp_path / "reused", pid=os.getpid(), host=socket.gethostname(), started_at=1000.0)
    assert "ended without closing" in not_listening_reason(tmp_path / "reused", tmp_path)


def test_another_host_is_judged_by_its_heartbeat(tmp_path: Path) -> None:
    run_dir = tmp_path / "remote"
    _listener(run_dir, pid=1234, host="elsewhere-" + socket.gethostname())
    assert not_listening_reason(run_dir, tmp_path) is None
    old = time.time() - STALE_HEARTBEAT_S - 60
    os.utime(listener_path(run_dir), (old, old))
    assert "last checked for requests 6 min ago" in not_listening_reason(run_dir, tmp_path)
