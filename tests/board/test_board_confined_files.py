"""Files under a run are read only below the log directory and only when regular: links leading out of it (alerts,
memory snapshots, capture requests and status), FIFOs, devices and directories in place of a file are refused with
a reason, never followed, opened or waited on; the capture request is never written through such a link."""
from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from board.data.alerts import AlertIndex
from board.data.memory import SnapshotCache, memory_alerts, snapshot_headers
from board.data.profile_captures import find_captures, request_capture
from board.data.store import LogdirStore
from board_helpers import write_scalars
from instrumentation.format import trace as fmt
from instrumentation.format.alerts import ALERTS_RELPATH, Alert, AlertWriter
from instrumentation.format.capture_listener import write_listener
from instrumentation.format.confined import RefusedFile, open_regular, write_atomic
from instrumentation.format.memory_snapshot import AllocatorState, MemorySnapshot, write_snapshot

SECRET = "outside-the-logdir"
SNAPSHOT_ID = "2026_01_01_00_00_00"


def _returns_without_hanging(call: Callable[[], object]) -> object:
    """`call()` in a thread. NOTE: a hang detector for FIFOs (the old code blocked forever), not a speed limit."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the call blocked on a file that is not a regular file"
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]


def _store(tmp_path: Path, runs: tuple[str, ...] = ("run",)) -> LogdirStore:
    logdir = tmp_path / "logs"
    for run in runs:
        write_scalars(logdir / run, "loss", np.arange(3), np.zeros(3))
    store = LogdirStore(logdir)
    store.refresh()
    return store


def _outside_alerts(tmp_path: Path) -> Path:
    """A directory outside the log directory holding an alerts file with one alert."""
    outside = tmp_path / "outside"
    AlertWriter(outside).write(Alert("nonfinite", "error", SECRET, "must not be served", 1))
    return outside


def _snapshot(step: int) -> MemorySnapshot:
    return MemorySnapshot("cpu", "manual", step, 1.7e9, AllocatorState(10, 10, 10, None, None), ())


def test_a_symlinked_alerts_directory_leading_outside_is_not_read(tmp_path: Path) -> None:
    store = _store(tmp_path, ("run", "inner"))
    outside = _outside_alerts(tmp_path)
    (store.logdir / "run" / "plugins").mkdir()
    (store.logdir / "run" / "plugins" / "alerts").symlink_to(outside / "plugins" / "alerts", target_is_directory=True)
    # a link that stays inside the log directory is followed as before
    AlertWriter(store.logdir / "inner").write(Alert("dead_units", "warning", "fc1", "inside", 2))
    index = AlertIndex(store)
    assert [(item.run, item.alert.subject) for item in index.alerts()] == [("inner", "fc1")]
    assert "leads outside" in index.problems()["run"]
    assert memory_alerts(store, "run") == []


def test_a_symlinked_alerts_file_leading_outside_is_not_read(tmp_path: Path) -> None:
    store = _store(tmp_path)
    outside = _outside_alerts(tmp_path)
    (store.logdir / "run" / "plugins" / "alerts").mkdir(parents=True)
    (store.logdir / "run" / ALERTS_RELPATH).symlink_to(outside / ALERTS_RELPATH)
    assert AlertIndex(store).alerts() == []
    (store.logdir / "other").mkdir()
    os.replace(store.logdir / "run" / ALERTS_RELPATH, store.logdir / "other" / "link")  # the link moved inside
    (store.logdir / "run" / ALERTS_RELPATH).symlink_to(store.logdir / "other" / "link")  # a chain out: refused
    assert AlertIndex(store).alerts() == []


def test_a_fifo_in_place_of_the_alerts_file_is_refused_at_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store.logdir / "run" / "plugins" / "alerts").mkdir(parents=True)
    os.mkfifo(store.logdir / "run" / ALERTS_RELPATH)
    index = AlertIndex(store)
    assert _returns_without_hanging(index.alerts) == []
    assert "a FIFO, not a regular file" in index.problems()["run"]
    assert _returns_without_hanging(lambda: memory_alerts(store, "run")) == []


def test_a_directory_in_place_of_the_alerts_file_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store.logdir / "run" / ALERTS_RELPATH).mkdir(parents=True)
    index = AlertIndex(store)
    assert index.alerts() == []
    assert "a directory, not a regular file" in index.problems()["run"]


def test_a_device_in_place_of_a_file_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    store = _store(tmp_path)
    device = store.logdir / "run" / ALERTS_RELPATH
    device.parent.mkdir(parents=True)
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # the kernel's /dev/zero: endless zero bytes
    except PermissionError:
        pytest.skip("creating a device node needs root (CI runs as root)")
    index = AlertIndex(store)
    assert _returns_without_hanging(index.alerts) == []
    assert "a character device, not a regular file" in index.problems()["run"]
    with pytest.raises(RefusedFile, match="character device"):
        open_regular(device)  # without a root as well: regular files only


def test_memory_snapshots_are_not_read_through_a_link_leading_outside_or_from_a_fifo(tmp_path: Path) -> None:
    store = _store(tmp_path, ("run", "fifo"))
    outside = Path(write_snapshot(tmp_path / "outside", _snapshot(step=7), SNAPSHOT_ID))
    (store.logdir / "run" / "plugins" / "memory").mkdir(parents=True)
    (store.logdir / "run" / "plugins" / "memory" / outside.name).symlink_to(outside)
    [(listed, header)] = snapshot_headers(store, "run")
    assert listed.capture_id == SNAPSHOT_ID and header is None
    with pytest.raises(ValueError, match="leads outside"):
        SnapshotCache().load(store, "run", SNAPSHOT_ID)
    (store.logdir / "fifo" / "plugins" / "memory").mkdir(parents=True)
    os.mkfifo(store.logdir / "fifo" / "plugins" / "memory" / outside.name)
    [(_, header)] = _returns_without_hanging(lambda: snapshot_headers(store, "fifo"))
    assert header is None
    with pytest.raises(ValueError, match="a FIFO"):
        _returns_without_hanging(lambda: SnapshotCache().load(store, "fifo", SNAPSHOT_ID))


def test_a_fifo_named_like_a_trace_is_not_listed_as_a_capture(tmp_path: Path) -> None:
    store = _store(tmp_path)
    capture_dir = Path(fmt.new_capture_dir(store.logdir / "run"))
    os.mkfifo(capture_dir / fmt.trace_file_name("host", 1))
    assert find_captures(store.logdir) == {}
    with pytest.raises(RefusedFile, match="a FIFO"):
        _returns_without_hanging(lambda: fmt.read_trace(capture_dir / fmt.trace_file_name("host", 1)))


def test_capture_requests_are_not_written_or_read_through_a_link_leading_outside(tmp_path: Path) -> None:
    store = _store(tmp_path)
    run_dir, outside = store.logdir / "run", tmp_path / "outside"
    outside.mkdir()
    (run_dir / "plugins").mkdir()
    (run_dir / "plugins" / "profile").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RefusedFile, match="leads outside"):
        request_capture({"run": run_dir}, "run", 3, True, store.logdir)
    assert list(outside.iterdir()) == []
    # a status file of the training side reached through the link is not read either
    (outside / fmt.CAPTURE_REQUEST_NAME).write_text(fmt.CaptureRequest("r1", 5, 1.7e9).to_json())
    assert fmt.read_capture_status(run_dir, root=store.logdir).state == "none"
    assert fmt.read_capture_status(run_dir).state == "pending"  # the training side's own reading, unconfined


def test_a_link_at_the_request_name_is_replaced_not_written_through(tmp_path: Path) -> None:
    store = _store(tmp_path)
    run_dir, target = store.logdir / "run", tmp_path / "outside.txt"
    target.write_text("keep me")
    (run_dir / "plugins" / "profile").mkdir(parents=True)
    link = run_dir / "plugins" / "profile" / fmt.CAPTURE_REQUEST_NAME
    link.symlink_to(target)
    write_listener(run_dir)  # a training process listens (this one)
    request = request_capture({"run": run_dir}, "run", 3, True, store.logdir)
    assert target.read_text() == "keep me"
    assert not link.is_symlink()
    assert fmt.read_capture_status(run_dir, root=store.logdir).request_id == request.request_id


def test_write_atomic_refuses_a_directory_that_became_a_link_after_the_check(tmp_path: Path, monkeypatch) -> None:
    """The race the descriptor walk closes: a directory swapped for a link between resolving the path and opening."""
    import instrumentation.format.confined as confined

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    resolve = confined._inside

    def swap_after_check(path, checked_root):
        result = resolve(path, checked_root)
        os.rmdir(root / "a")
        os.symlink(outside, root / "a")
        return result

    monkeypatch.setattr(confined, "_inside", swap_after_check)
    with pytest.raises(OSError):
        write_atomic(root / "a" / "file", b"data", root)
    assert list(outside.iterdir()) == []
