"""The writer on a full disk (a real, tiny tmpfs, and ENOSPC injected on exact writes): no descriptor or file
leaks, one warning, dropped events counted, recovery when space returns, nothing already written lost."""
from __future__ import annotations

import errno
import logging
import os
import subprocess
from pathlib import Path

import pytest

from event_helpers import event_files
from instrumentation import SummaryWriter
from instrumentation.format import EventFileReader
from instrumentation.summary import event_file

DISK_BYTES = 64 * 1024


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fill(disk: Path) -> Path:
    """Writes a filler file until the file system refuses more; returns it (delete it to free the space)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
    return filler


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs mounted under tmp_path: a real file system that runs out of space."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root or CAP_SYS_ADMIN): {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def _steps(path: str) -> list[int]:
    reader = EventFileReader(path)
    steps = [value.step for event in reader.read() for value in event.values]
    assert reader.corrupt_records == 0
    return steps


def _tensorboard_steps(path: str) -> list[int]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return [event.step for event in EventFileLoader(path).Load() if event.summary.value]


def _cannot_write_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "cannot write" in r.getMessage()]


def test_new_run_on_a_full_disk_leaks_no_descriptor_or_file_and_recovers(full_disk, caplog):
    filler = _fill(full_disk)
    run = full_disk / "run"
    descriptors = _open_descriptors()
    with caplog.at_level(logging.INFO, logger="instrumentation.summary"):
        writer = SummaryWriter(run, flush_secs=3600)
        for step in range(300):
            writer.add_scalar("loss", float(step), step)
            writer.flush()
        assert _open_descriptors() == descriptors  # the old code held 301 more here
        assert event_files(run) == []  # and 301 empty event files
        assert writer.dropped_events == 300
        with open(full_disk / "still-openable", "wb"):  # the training loop's own open() works
            pass
        assert len(_cannot_write_warnings(caplog)) == 1
        assert "No space left on device" in _cannot_write_warnings(caplog)[0]

        filler.unlink()  # space returns
        for step in range(300, 310):
            writer.add_scalar("loss", float(step), step)
        writer.flush()
        assert [r.getMessage() for r in caplog.records if "writes to" in r.getMessage()] == [
            f"SummaryWriter writes to {run} again (300 events were dropped meanwhile)"]
        writer.close()
    assert _open_descriptors() == descriptors
    [path] = event_files(run)
    assert _steps(path) == _tensorboard_steps(path) == list(range(300, 310))
    assert writer.dropped_events == 300 and len(_cannot_write_warnings(caplog)) == 1


def test_disk_filling_mid_file_keeps_what_was_written_and_appends_after_recovery(full_disk, caplog):
    run = full_disk / "run"
    writer = SummaryWriter(run, flush_secs=3600)
    for step in range(100):
        writer.add_scalar("loss", float(step), step)
    writer.flush()
    [path] = event_files(run)
    size_before = os.path.getsize(path)
    filler = _fill(full_disk)
    descriptors = _open_descriptors()
    with caplog.at_level(logging.WARNING, logger="instrumentation.summary"):
        dropped = 0
        for flush in range(50):  # enough to fill the file's last page, then fail: a torn write, cut back
            for step in range(100 + 100 * flush, 200 + 100 * flush):
                writer.add_scalar("loss", float(step), step)
            writer.flush()
            dropped = writer.dropped_events
        assert dropped > 0 and dropped % 100 == 0 and _open_descriptors() == descriptors
        assert len(_cannot_write_warnings(caplog)) == 1
    written_while_full = _steps(path)
    assert written_while_full[:100] == list(range(100)) and os.path.getsize(path) >= size_before
    assert written_while_full == list(range(len(written_while_full)))  # whole flushes only, in order
    filler.unlink()
    writer.add_scalar("loss", -1.0, 10_000)
    writer.close()
    assert _steps(path) == _tensorboard_steps(path) == written_while_full + [10_000]
    assert len(written_while_full) + dropped == 5100 and writer.dropped_events == dropped


def test_close_on_a_full_disk_releases_every_descriptor_and_reports_the_total(full_disk, caplog):
    run = full_disk / "run"
    descriptors = _open_descriptors()
    writer = SummaryWriter(run, flush_secs=3600, max_queue=10**6)
    writer.add_scalar("loss", 0.0, 0)
    writer.flush()
    _fill(full_disk)
    with caplog.at_level(logging.WARNING, logger="instrumentation.summary"):
        for step in range(1, 2001):
            writer.add_scalar("loss", float(step), step)
            writer.add_scalars("pair", {"a": 1.0, "b": 2.0}, step)  # two sub-runs created on the full disk
        writer.close()
    assert _open_descriptors() == descriptors
    assert writer.dropped_events > 0
    assert any(f"{writer.dropped_events} events could not be written" in r.getMessage() for r in caplog.records)
    assert event_files(run / "pair_a") == event_files(run / "pair_b") == []
    [path] = event_files(run)
    steps = _steps(path)
    assert steps == list(range(len(steps))) and len(steps) + writer.dropped_events == 2001 + 2 * 2000


def _failing_writes(monkeypatch, fail_calls: set[int]) -> list[int]:
    """os.write in the event file layer raises ENOSPC on the given call numbers (0-based); returns the call log."""
    real_write, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) - 1 in fail_calls:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(event_file.os, "write", write)
    return calls


def test_injected_enospc_on_a_new_runs_header_leaves_no_file_and_the_next_flush_starts_it(tmp_path, monkeypatch):
    descriptors = _open_descriptors()
    calls = _failing_writes(monkeypatch, {0})  # the file_version record of the new run
    writer = SummaryWriter(tmp_path / "run", flush_secs=3600)
    assert len(calls) == 1 and event_files(tmp_path / "run") == []
    assert _open_descriptors() == descriptors
    writer.add_scalar("x", 1.0, 1)
    writer.close()
    [path] = event_files(tmp_path / "run")
    assert _steps(path) == [1] and writer.dropped_events == 0
    assert _open_descriptors() == descriptors


def test_injected_enospc_on_one_sub_run_does_not_touch_the_others(tmp_path, monkeypatch):
    writer = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)  # main run's header: a real write
    calls = _failing_writes(monkeypatch, {1})  # in the next flush: main run's events ok, pair_a's header fails
    writer.add_scalar("x", 1.0, 1)
    writer.add_scalars("pair", {"a": 1.0, "b": 2.0}, 1)
    writer.flush()
    assert writer.dropped_events == 1 and event_files(tmp_path / "pair_a") == []
    writer.add_scalars("pair", {"a": 3.0, "b": 4.0}, 2)
    writer.close()
    assert len(calls) > 3
    assert _steps(event_files(tmp_path)[0]) == [1]
    assert _steps(event_files(tmp_path / "pair_a")[0]) == [2]
    assert _steps(event_files(tmp_path / "pair_b")[0]) == [1, 2]


def test_a_close_that_fails_still_closes_every_other_file(tmp_path, monkeypatch, caplog):
    writer = SummaryWriter(tmp_path, flush_secs=3600)
    writer.add_scalars("pair", {"a": 1.0, "b": 2.0}, 1)
    writer.flush()
    descriptors = _open_descriptors()
    real_close, closed = os.close, []

    def close(fd):
        closed.append(fd)
        real_close(fd)
        if len(closed) == 1:
            raise OSError(errno.EIO, "Input/output error")  # as NFS reports a late write error at close

    monkeypatch.setattr(event_file.os, "close", close)
    with caplog.at_level(logging.WARNING, logger="instrumentation.summary"):
        writer.close()
    assert len(closed) == 3 and _open_descriptors() == descriptors - 3
    assert "Input/output error" in caplog.text


def test_a_torn_record_that_cannot_be_cut_back_ends_the_file_and_a_new_one_takes_over(tmp_path, monkeypatch):
    writer = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    writer.add_scalar("x", 1.0, 1)
    writer.flush()
    real_write, real_ftruncate = os.write, os.ftruncate

    def torn_write(fd, data):
        real_write(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    def refused_ftruncate(fd, length):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(event_file.os, "write", torn_write)
    monkeypatch.setattr(event_file.os, "ftruncate", refused_ftruncate)
    descriptors = _open_descriptors()
    writer.add_scalar("x", 2.0, 2)
    writer.flush()
    assert writer.dropped_events == 1 and _open_descriptors() == descriptors - 1  # the torn file is closed
    monkeypatch.setattr(event_file.os, "write", real_write)
    monkeypatch.setattr(event_file.os, "ftruncate", real_ftruncate)
    writer.add_scalar("x", 3.0, 3)
    writer.close()
    first, second = sorted(event_files(tmp_path), key=lambda path: int(path.rsplit(".", 1)[1]))  # by <n>
    torn = EventFileReader(first)
    assert [v.step for event in torn.read() for v in event.values] == [1]  # the torn tail reads as a partial record
    assert _steps(second) == _tensorboard_steps(second) == [3]
