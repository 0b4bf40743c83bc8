"""Fixtures for the board: fixture log directories written by real writers, a served board, Debian's chromium."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from board_helpers import REPO
from instrumentation import SummaryWriter

CHROMIUM = os.environ.get("FLOWSCOPE_CHROMIUM", "/usr/bin/chromium")  # Debian's; another path for a check
# NOTE: expect() waits 5 s by default whatever page.set_default_timeout says; on a loaded 2-core machine a
# board callback can take longer. This bounds waits for a state, it measures nothing.
expect.set_options(timeout=30_000)
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync"]


def pytest_unconfigure(config) -> None:
    """Say loudly, at the end of `make test`, that the browser tests did not run when chromium is missing: after
    the short summary and the "N passed" line (both printed at session finish, before this hook), so it is last."""
    terminalreporter = config.pluginmanager.get_plugin("terminalreporter")
    if Path(CHROMIUM).exists() or terminalreporter is None:
        return
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "chromium" in str(r.longrepr)]
    terminalreporter.write_line("install Debian's chromium with `apt-get install -y chromium` (never `playwright "
                                "install`) and rerun `make test`: the board's pages are only tested in a real browser.",
                                red=True)
    terminalreporter.write_sep("!", f"{len(skipped)} BROWSER TESTS SKIPPED: Debian's chromium is not installed",
                               red=True, bold=True)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM} (apt-get install -y chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": LAUNCH_ARGS}


@pytest.fixture()
def fixture_logdir(tmp_path: Path) -> Path:
    """Three runs (two of them ranks of one group), scalars with a NaN and a spike, histograms."""
    logdir = tmp_path / "logs"
    rng = np.random.default_rng(0)
    for run, offset in (("baseline", 0.0), ("ddp/rank0", 0.1), ("ddp/rank1", 0.2)):
        with SummaryWriter(logdir / run) as writer:
            for step in range(0, 3000, 5):
                loss = float(np.exp(-step / 800) + offset + 0.02 * rng.standard_normal())
                if run == "baseline" and step == 1500:
                    loss = 50.0  # a spike that must survive downsampling
                writer.add_scalar("loss/train", loss, step, walltime=1.7e9 + step)
                writer.add_scalar("lr", 0.1 * 0.999**step, step, walltime=1.7e9 + step)
                if step % 300 == 0:
                    writer.add_histogram("weight/fc", rng.standard_normal(500) + step / 1000, step,
                                         walltime=1.7e9 + step)
            writer.add_scalar("loss/train", float("nan"), 3000, walltime=1.7e9 + 3000)
    return logdir


class BoardProcess:
    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process, self.url = process, url


@pytest.fixture()
def serve_board(tmp_path: Path) -> Iterator[Callable[..., BoardProcess]]:
    """Start `python -m board` on a free port; returns its URL once it is listening."""
    started: list[subprocess.Popen] = []

    def start(logdir: Path, *extra: str) -> BoardProcess:
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            [sys.executable, "-m", "board", "--logdir", str(logdir), "--port", "0", "--reload-interval", "0.5", *extra],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(process)
        lines: list[str] = []
        for _ in range(200):  # bounded: the URL is printed once the socket listens
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"http://[\d.]+:\d+", line)
            if found:
                return BoardProcess(process, found.group(0))
        raise AssertionError("board did not print its URL:\n" + "".join(lines))

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
