"""The `board` command: free port, busy port, a log directory that appears later, warnings, live tailing."""
from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from board import port_check
from board.cli import build_parser, parse_args, startup_warnings
from board.config import BoardConfig
from board_helpers import REPO, wait_for, write_scalars


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_defaults_are_safe() -> None:
    config = parse_args(["--logdir", "logs"])
    assert (config.host, config.port, config.token) == ("127.0.0.1", 6006, None)
    assert startup_warnings(config) == []
    assert startup_warnings(parse_args(["--logdir", "x", "--host", "::1"])) == []


def test_non_loopback_without_token_warns() -> None:
    [warning] = startup_warnings(parse_args(["--logdir", "x", "--host", "0.0.0.0"]))
    assert "--token" in warning and "0.0.0.0" in warning
    assert startup_warnings(parse_args(["--logdir", "x", "--host", "0.0.0.0", "--token", "t"])) == []


def test_bad_options_are_rejected() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--logdir", "x", "--reload-interval", "0"])
    with pytest.raises(SystemExit):
        parse_args([])


@pytest.mark.parametrize("token", ["", " ", "\t\n"])
def test_an_empty_or_blank_token_is_refused_at_start(tmp_path: Path, token: str) -> None:
    """`--token "$TOKEN"` with $TOKEN unset passes "": the board must not start without authentication."""
    result = subprocess.run([sys.executable, "-m", "board", "--logdir", str(tmp_path), "--host", "0.0.0.0",
                             "--port", "0", "--token", token], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "serving" not in result.stdout
    assert "board: error: --token is" in result.stderr and "$TOKEN" in result.stderr
    assert parse_args(["--logdir", "x", "--token", " s3cret "]).token == " s3cret "  # padding is kept, not refused


def test_port_in_use_gives_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "board", "--logdir", str(tmp_path), "--port", str(port)],
                                cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert f"port {port}" in line and "--port 0" in line


def test_help_shows_every_default_from_the_config_fields() -> None:
    """Each option with a value by default says it, read from `BoardConfig` (the one place options are declared)."""
    text = " ".join(build_parser().format_help().split())  # argparse wraps lines
    shown = [f for f in dataclasses.fields(BoardConfig) if f.default not in (dataclasses.MISSING, None, False)]
    assert {f.name for f in shown} == {"host", "port", "reload_interval"}
    for option in shown:
        assert f"(default: {option.default})" in text, option.name
    assert "(default: 127.0.0.1)" in text and "(default: 6006)" in text and "(default: 5.0)" in text
    assert "(default: no token)" in text and "(default: $XDG_CACHE_HOME/flowscope/board" in text
    help_run = subprocess.run([sys.executable, "-m", "board", "--help"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
    assert help_run.returncode == 0 and "(default: 6006)" in " ".join(help_run.stdout.split())


def test_a_logdir_that_is_a_file_is_an_error_saying_so(tmp_path: Path) -> None:
    event_file = tmp_path / "run" / "events.out.tfevents.1.host"
    event_file.parent.mkdir()
    event_file.write_bytes(b"")
    result = subprocess.run([sys.executable, "-m", "board", "--logdir", str(event_file), "--port", "0"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "serving" not in result.stdout
    assert f"--logdir {event_file} is a file, not a directory" in result.stderr
    assert f"(e.g. {event_file.parent})" in result.stderr and "does not exist" not in result.stderr
    under_a_file = subprocess.run([sys.executable, "-m", "board", "--logdir", str(event_file / "logs"), "--port", "0"],
                                  cwd=REPO, capture_output=True, text=True, timeout=120)
    assert under_a_file.returncode == 2 and "serving" not in under_a_file.stdout
    assert f"can never exist: {event_file} is a file, not a directory" in under_a_file.stderr
    assert parse_args(["--logdir", str(tmp_path)]).logdir == tmp_path  # a directory is served
    assert parse_args(["--logdir", str(tmp_path / "later")]).logdir == tmp_path / "later"  # waited for


def test_a_logdir_that_cannot_be_looked_at_is_an_error_not_a_traceback(tmp_path: Path, monkeypatch) -> None:
    def refused(path: Path) -> bool:  # what a parent directory without search permission answers (not as root)
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(Path, "exists", refused)
    with pytest.raises(ValueError, match=r"--logdir .*locked/logs cannot be read: Permission denied"):
        BoardConfig(logdir=tmp_path / "locked" / "logs")


def test_port_check_says_how_make_demo_chooses_another() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert port_check.port_in_use("127.0.0.1", port)
        result = subprocess.run([sys.executable, "-m", "board.port_check", "--port", str(port), "--choose-with",
                                 "make demo PORT=<n>"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert f"port {port} on 127.0.0.1 is in use" in line
    assert "make demo PORT=<n>" in line and "make demo PORT=0" in line and "--port" not in line
    assert not port_check.port_in_use("127.0.0.1", port)  # closed: free again
    assert port_check.main(["--port", str(port)]) == 0 and port_check.main(["--port", "0"]) == 0
    with pytest.raises(SystemExit):
        port_check.main(["--port", "1", "--choose-with", "PORT=7"])  # no <n>: the message could not say the port


def test_make_demo_checks_the_port_before_training(tmp_path: Path) -> None:
    """`make demo` on a taken port stops at once, before the demo writes anything, naming `make demo PORT=`."""
    logdir = tmp_path / "demo-logs"
    make = ["make", "-o", ".venv/.installed", "demo", f"PY={sys.executable}", f"LOGDIR={logdir}"]  # -o: no install
    alone = {**os.environ, "MAKEFLAGS": "", "MAKELEVEL": ""}  # under `make test`: no "Entering directory" lines
    planned = subprocess.run([*make, "-n", "PORT=6006"], cwd=REPO, capture_output=True, text=True, timeout=60,
                             env=alone)
    commands = planned.stdout.splitlines()  # checked first: a demo that trains before the check would run minutes
    assert "board.port_check --port 6006" in commands[0] and "instrumentation.demo" in commands[1], commands
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([*make, f"PORT={port}"], cwd=REPO, capture_output=True, text=True, timeout=120,
                                env=alone)
    assert result.returncode != 0
    assert f"port {port} on 127.0.0.1 is in use; choose another with make demo PORT=<n>" in result.stderr
    assert "instrumentation.demo" not in result.stdout and not logdir.exists()


def test_missing_logdir_is_waited_for_then_served(tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "not-yet"
    board = serve_board(logdir)
    body = get_json(f"{board.url}/api/runs")
    assert body["logdir_exists"] is False and body["runs"] == []
    with urllib.request.urlopen(f"{board.url}/", timeout=30) as response:
        assert response.status == 200
    write_scalars(logdir / "run", "loss", np.arange(10), np.arange(10) * 0.5)
    wait_for(lambda: get_json(f"{board.url}/api/runs")["runs"], "the new run to be served")
    assert get_json(f"{board.url}/api/scalars?run=run&tag=loss")["values"] == [s * 0.5 for s in range(10)]


WRITER = """
import sys, time
from instrumentation import SummaryWriter
writer = SummaryWriter(sys.argv[1], flush_secs=1)
for step in range(int(sys.argv[2])):
    writer.add_scalar("live/value", step * 0.25, step)
    if step % 50 == 0:
        writer.flush()
        time.sleep(0.01)
writer.close()
"""


def test_a_live_training_process_keeps_being_served_correctly(tmp_path: Path, serve_board) -> None:
    """While another process writes for the whole test, every answer is a correct prefix of what it writes."""
    total = 20_000
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "logs" / "live"), str(total)], cwd=REPO)
    try:
        board = serve_board(tmp_path / "logs")
        seen_lengths = []

        def complete() -> bool:
            try:
                body = get_json(f"{board.url}/api/scalars?run=live&tag=live/value")
            except urllib.error.HTTPError as error:
                assert error.code == 404  # not written yet
                return False
            steps = body["steps"]
            assert steps == list(range(len(steps)))  # a prefix: nothing missing, duplicated or reordered
            assert body["values"] == [s * 0.25 for s in steps]
            seen_lengths.append(len(steps))
            return len(steps) == total

        wait_for(complete, "every point written by the live process", attempts=1200, pause_s=0.1)
        assert seen_lengths == sorted(seen_lengths)
    finally:
        writer.wait(timeout=300)
    assert writer.returncode == 0
