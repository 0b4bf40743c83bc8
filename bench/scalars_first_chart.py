"""Time from navigation to the first Scalars chart drawn, the board vs TensorBoard, on one log directory, in one run.

    python bench/scalars_first_chart.py [--rounds 5] [--load-fast false|true] [--logdir DIR]

Uses bench/board_ingest.py's 4 runs × 10 tags × 10k steps directory (generated under .bench/ once), or `--logdir`
(e.g. the demo's: `python -m instrumentation.demo --logdir DIR`). Starts a real `board` and a real TensorBoard on
it, waits until both serve it (every point of the bench directory; for another directory, the board's first pass
done and TensorBoard's tag list steady for 2 s), then in Debian's chromium navigates to each one's scalars view
`--rounds` times, alternating, and reads the time from navigation start (the page's performance clock) to the
first chart holding the data:
  - board: the first `/scalars` chart with a trace drawn (an SVG line with points, or a marker);
  - TensorBoard: the first scalar card of the Time Series dashboard whose axes were set from its data (a tick
    outside [0, 1], such as "2,000", "10k" or "20"; before its data arrives a card's axes are [0, 1]).
    TensorBoard paints the lines on a canvas (in a worker where it can), possibly a frame after its axis: its
    time is, if anything, slightly flattered.
Prints each time and the medians, the ratio board / TensorBoard and the load average. A benchmark, not a test:
load changes it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from board_ingest import REPO, SMALL, TENSORBOARD, free_port, generate, get, stop_tree, wait_until  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync"]
BOARD_DRAWN = """() => {
    const gd = document.querySelector('#scalars-sections .js-plotly-plot');
    const drawn = gd && gd.querySelector('.scatterlayer .trace path.js-line[d], .scatterlayer .trace path.point');
    return drawn ? performance.now() : false; }"""
TENSORBOARD_DRAWN = """() => {
    const card = document.querySelector('scalar-card');
    const ticks = card ? Array.from(card.querySelectorAll('line-chart-axis text')).map(t => t.textContent.trim()) : [];
    const value = label => parseFloat(label.replace(/,/g, '')) * (/k$/.test(label) ? 1e3 : 1);
    return ticks.some(label => value(label) > 1 || value(label) < 0) ? performance.now() : false; }"""


def start_board(logdir: Path, cache: Path, bench_directory: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "board", "--logdir", str(logdir), "--port", str(port)], cwd=REPO,
                               env={**os.environ, "XDG_CACHE_HOME": str(cache)}, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    run, tag = SMALL.last_tags()[-1]

    def loaded() -> bool:
        if not bench_directory:
            body = get(f"{base}/api/runs")
            return body is not None and json.loads(body)["loaded"]
        body = get(f"{base}/api/scalars?{urllib.parse.urlencode({'run': run, 'tag': tag})}")
        return body is not None and len(json.loads(body)["steps"]) == SMALL.steps

    wait_until(loaded, "the board to serve every run")
    return process, base + "/scalars"


def start_tensorboard(logdir: Path, load_fast: str, bench_directory: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([str(TENSORBOARD), "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1",
                                f"--load_fast={load_fast}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    seen: list[bytes | None] = [None]

    def steady() -> bool:  # the same non-empty tag list twice, 2 s apart
        body = get(f"{base}/data/plugin/scalars/tags")
        if body and json.loads(body) and body == seen[0]:
            return True
        seen[0] = body
        time.sleep(2)
        return False

    def loaded() -> bool:
        if not bench_directory:
            return steady()
        points = []
        for run, tag in SMALL.last_tags():
            body = get(f"{base}/data/plugin/scalars/scalars?{urllib.parse.urlencode({'run': run, 'tag': tag})}")
            try:
                points.append(bool(body) and json.loads(body)[-1][1] == SMALL.steps - 1)
            except ValueError:
                return False
        return all(points)

    wait_until(loaded, "TensorBoard to serve every run")
    return process, base + "/#timeseries"


def first_chart_ms(page, url: str, condition: str) -> float:
    page.goto("about:blank")
    page.goto(url, wait_until="commit")
    return float(page.wait_for_function(condition, polling="raf", timeout=120_000).json_value())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load-fast", choices=("false", "true"), default="false")
    parser.add_argument("--logdir", type=Path, help="another log directory (default: the bench's 4 × 10 × 10k)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    logdir = args.logdir or generate(SMALL)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as cache:
        board, board_url = start_board(logdir, Path(cache), args.logdir is None)
        tensorboard, tensorboard_url = start_tensorboard(logdir, args.load_fast, args.logdir is None)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                first_chart_ms(page, board_url, BOARD_DRAWN)  # one warm-up each: browser caches, Python imports
                first_chart_ms(page, tensorboard_url, TENSORBOARD_DRAWN)
                ours, theirs = [], []
                for _ in range(args.rounds):
                    ours.append(first_chart_ms(page, board_url, BOARD_DRAWN))
                    theirs.append(first_chart_ms(page, tensorboard_url, TENSORBOARD_DRAWN))
                browser.close()
        finally:
            stop_tree(board)
            stop_tree(tensorboard)
    print(f"log directory: {logdir}" if args.logdir else
          f"log directory: {SMALL.runs} runs × {SMALL.tags} tags × {SMALL.steps:,} steps ({logdir})")
    print("board       first chart (ms):", " ".join(f"{t:.0f}" for t in ours))
    print(f"TensorBoard first chart (ms, load_fast={args.load_fast}):", " ".join(f"{t:.0f}" for t in theirs))
    board_ms, tensorboard_ms = statistics.median(ours), statistics.median(theirs)
    print(f"median: board {board_ms:.0f} ms, TensorBoard {tensorboard_ms:.0f} ms, ratio {board_ms / tensorboard_ms:.2f}"
          f" (target: board <= 1000 ms)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
