"""Crash safety, fork safety and I/O errors: flushed data survives SIGKILL; errors are counted, never raised."""
from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from event_helpers import event_files, read_run, values_of
from instrumentation import SummaryWriter
from instrumentation.format import EventFileReader
from instrumentation.summary import event_file


def test_sigkill_after_flush_leaves_every_flushed_event_readable(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, sys
        from instrumentation import SummaryWriter
        writer = SummaryWriter({str(tmp_path)!r}, flush_secs=3600, max_queue=10**6)
        for step in range(5000):
            writer.add_scalar("loss", step * 0.5, step)
        writer.add_text("note", "before the kill", 5000)
        writer.flush()
        for step in range(5001, 6000):  # queued, never flushed
            writer.add_scalar("loss", step * 0.5, step)
        sys.stdout.write("flushed\\n"); sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == -signal.SIGKILL and result.stdout == "flushed\n", result.stderr
    events = read_run(tmp_path)
    steps = [v.step for v in values_of(events, "loss")]
    assert steps[:5000] == list(range(5000))  # everything flushed; maybe some of the rest, never a torn record
    assert values_of(events, "note/text_summary")[0].text == "before the kill"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_writes_its_own_file_never_the_parents(tmp_path):
    writer = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    writer.add_scalar("x", 1.0, 1)  # queued in the parent when it forks
    pid = os.fork()
    if pid == 0:  # child
        try:
            writer.add_scalar("x", 2.0, 2)
            writer.close()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    writer.add_scalar("x", 3.0, 3)
    writer.close()
    by_pid = {}
    for path in event_files(tmp_path):
        reader = EventFileReader(path)
        steps = [v.step for event in reader.read() for v in event.values]
        assert reader.corrupt_records == 0
        by_pid[int(os.path.basename(path).split(".")[5])] = steps
    assert by_pid == {os.getpid(): [1, 3], pid: [2]}


def test_unwritable_log_dir_is_reported_once_and_counted(tmp_path, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="instrumentation.summary"):
        writer = SummaryWriter(blocker / "run")
        for step in range(10):
            writer.add_scalar("x", 1.0, step)  # never raises in the training loop
        writer.flush()
        assert writer.dropped_events == 10
        writer.close()
    messages = [record.getMessage() for record in caplog.records]
    cannot_write = [message for message in messages if "cannot write" in message]
    assert len(cannot_write) == 1 and str(blocker / "run") in cannot_write[0]
    assert any("10 events could not be written" in message for message in messages)


def test_disk_full_mid_file_keeps_the_file_readable_and_counts_drops(tmp_path, monkeypatch, caplog):
    writer = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    writer.add_scalar("x", 1.0, 1)
    writer.flush()
    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data[:7]))  # a torn write, then the error
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(event_file.os, "write", full_disk)
    with caplog.at_level(logging.WARNING, logger="instrumentation.summary"):
        for step in range(2, 5):
            writer.add_scalar("x", 1.0, step)
        writer.flush()
    assert writer.dropped_events == 3
    assert "No space left on device" in caplog.text and str(tmp_path) in caplog.text
    monkeypatch.setattr(event_file.os, "write", real_write)  # space again
    writer.add_scalar("x", 1.0, 5)
    writer.close()
    reader = EventFileReader(event_files(tmp_path)[0])
    assert [v.step for event in reader.read() for v in event.values] == [1, 5] and reader.corrupt_records == 0


def test_interpreter_exit_flushes_pending_events(tmp_path):
    script = f"from instrumentation import SummaryWriter\n" \
             f"w = SummaryWriter({str(tmp_path)!r}, flush_secs=3600, max_queue=10**6)\n" \
             f"[w.add_scalar('x', float(i), i) for i in range(100)]\n"
    subprocess.run([sys.executable, "-c", script], check=True)
    assert [v.step for v in values_of(read_run(tmp_path), "x")] == list(range(100))
