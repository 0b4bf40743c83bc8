"""Time of the HParams page on 1,000 runs (target ≤ 2 s from navigation to the table and figures drawn).

    python bench/board_hparams.py [--runs 1000] [--repeats 3]

Writes `--runs` runs in torch's layout (each run: a `loss` series of 50 points; its `<run>/<unix time>/` sub-run:
the hparams experiment, session start and end records and two metrics), starts a real `board` process on
127.0.0.1 and, once the board has read the directory, measures:
  - the server's `hparams_table` (in this process, on a store of the same directory): wall and CPU time of its
    build, of a second call (cached per store generation) and of one after a refresh that read nothing new;
  - `/api/hparams`: wall time of the request;
  - the page in Debian's Chromium (Playwright): from `page.goto` to the table's first row, the parallel
    coordinates and the scatter drawn, `--repeats` times, after a first visit of the Runs page (which pays for
    fetching and compiling Dash's and Plotly's scripts, timed apart).
Prints the load average beside the figures: a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from instrumentation.format import frame_record, metadata  # noqa: E402
from instrumentation.summary import hparams  # noqa: E402
from instrumentation.summary.builders import file_version_event  # noqa: E402
from instrumentation.summary.scalar_records import scalar  # noqa: E402

WALL0 = 1.7e9


def write_runs(logdir: Path, runs: int) -> None:
    """Event files written with the writer's own record builders (1,000 SummaryWriter threads would dominate)."""
    for index in range(runs):
        run = logdir / f"trial_{index:04d}"
        sub = run / f"{WALL0 + index:.6f}"
        sub.mkdir(parents=True)
        records = [file_version_event(WALL0)] + [scalar("loss", 1.0 / (step + 1 + index % 7), step, WALL0 + step)
                                                 for step in range(50)]
        (run / metadata.event_file_name(0, wall_time_s=WALL0)).write_bytes(b"".join(map(frame_record, records)))
        values = {"lr": 10 ** -(1 + index % 4), "batch_size": 2 ** (4 + index % 3),
                  "optimizer": ("sgd", "adam")[index % 2], "dropout": (index % 5) / 10}
        metrics = {"hparam/accuracy": 0.5 + (index % 97) / 200, "hparam/loss": 1.0 - (index % 89) / 100}
        records = [file_version_event(WALL0), hparams.experiment_event(values, list(metrics), None, 0, WALL0),
                   hparams.session_start_event(values, 0, WALL0), hparams.session_end_event(0, WALL0)]
        records += [scalar(tag, value, 0, WALL0) for tag, value in metrics.items()]
        (sub / metadata.event_file_name(0, wall_time_s=WALL0)).write_bytes(b"".join(map(frame_record, records)))


def server_side(logdir: Path, runs: int) -> None:
    from board.data.hparams_table import hparams_table
    from board.data.store import LogdirStore

    store = LogdirStore(logdir, workers=0)
    started = time.perf_counter()
    store.refresh()
    print(f"store: first read of {runs} runs (+{runs} sub-runs) {time.perf_counter() - started:.2f} s wall")
    for what in ("built", "again (cached: the directory did not change)", "again after store.refresh()"):
        if what.endswith("refresh()"):
            store.refresh()
        wall, cpu = time.perf_counter(), time.process_time()
        table = hparams_table(store)
        print(f"hparams_table {what}: {len(table.rows)} rows x {len(table.hparam_names)} hparams x "
              f"{len(table.metric_tags)} metrics in {time.perf_counter() - wall:.3f} s wall, "
              f"{time.process_time() - cpu:.3f} s CPU")


def start_board(logdir: Path, cache: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "board", "--logdir", str(logdir), "--port", "0"], cwd=REPO,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for _ in range(200):
        line = process.stdout.readline()
        found = re.search(r"http://[\d.]+:\d+", line)
        if found:
            return process, found.group(0)
    process.kill()
    raise SystemExit("the board did not print its URL")


def wait_loaded(url: str, runs: int) -> None:
    import json

    for _ in range(1200):
        body = json.loads(urllib.request.urlopen(url + "/api/runs").read())
        if body["loaded"] and len(body["runs"]) == runs:
            return
        time.sleep(0.1)
    raise SystemExit("the board did not read the directory in 120 s")


def browser_side(url: str, repeats: int) -> None:
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    urllib.request.urlopen(url + "/api/hparams").read()
    print(f"/api/hparams: {time.perf_counter() - started:.3f} s wall")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.set_default_timeout(60_000)
        started = time.perf_counter()
        page.goto(url + "/")  # a first page: the browser fetches and compiles Dash's and Plotly's scripts once
        page.locator("table.fs-table tbody tr").first.wait_for()
        print(f"Runs page, first navigation (cold script cache): {time.perf_counter() - started:.2f} s")
        for attempt in range(repeats):
            started = time.perf_counter()
            page.goto(url + "/hparams")
            page.locator("#hparams-table tbody tr:has(td)").first.wait_for()
            page.locator("#hparams-parallel .scatterlayer .trace").first.wait_for()
            page.locator("#hparams-scatter .scatterlayer .point").first.wait_for()
            drawn_s = time.perf_counter() - started
            print(f"HParams page, navigation {attempt + 1}: table and figures drawn {drawn_s:.2f} s after goto")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as folder:
        logdir = Path(folder) / "logs"
        write_runs(logdir, args.runs)
        server_side(logdir, args.runs)
        process, url = start_board(logdir, Path(folder) / "cache")
        try:
            wait_loaded(url, args.runs)
            browser_side(url, args.repeats)
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
