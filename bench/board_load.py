"""Latency of `/api/scalars` under 200 concurrent clients, static and while a training process writes, in one run.

    python bench/board_load.py [--clients 200] [--requests 3000] [--runs 8] [--live-runs 4] [--tags 20] [--steps 5000]

Writes a log directory under a temporary folder, starts a real `board` process on 127.0.0.1, then measures
two phases against the same process:
  - static: nothing is written;
  - live: a separate process appends scalars with our SummaryWriter to `--live-runs` runs (every tag, steps as
    fast as it can unless `--writer-pause-s`, flushed every 0.2 s) while the board reloads every 0.5 s; the live
    series grow during the phase (≈ 5000 → 15000+ points), so their answers grow too.
Each phase sends `--requests` GET /api/scalars (a random run and tag of the directory, every point) from
`--clients` concurrent asyncio connections, bounded by `--phase-limit-s` each. Prints p50/p90/p99/max and the
live/static ratio of the p99 (target ≤ 3). A benchmark, not a test: numbers depend on the machine's load.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WRITER_SCRIPT = """
import sys, time
from instrumentation import SummaryWriter
logdir, pause_s = sys.argv[1], float(sys.argv[5])
runs, tags, start = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
writers = [SummaryWriter(f"{logdir}/live{r}", flush_secs=0.2) for r in range(runs)]
step = start
try:
    while True:
        for r, writer in enumerate(writers):
            for t in range(tags):
                writer.add_scalar(f"metric/{t:02d}", 1.0 / (step + 1) + r, step)
        step += 1
        time.sleep(pause_s)
except KeyboardInterrupt:
    print(f"live writer: {step - start} steps × {runs * tags} series written", flush=True)
finally:
    for writer in writers:
        writer.close()
"""


def write_logdir(logdir: Path, runs: int, live_runs: int, tags: int, steps: int) -> list[tuple[str, str]]:
    """`runs` static runs and `live_runs` runs the live writer continues; every (run, tag) to request."""
    from instrumentation import SummaryWriter

    rng = np.random.default_rng(0)
    names = [f"static{r}" for r in range(runs)] + [f"live{r}" for r in range(live_runs)]
    for run in names:
        with SummaryWriter(logdir / run) as writer:
            for step in range(steps):
                for t in range(tags):
                    writer.add_scalar(f"metric/{t:02d}", float(rng.random()), step, walltime=1.7e9 + step)
    return [(run, f"metric/{t:02d}") for run in names for t in range(tags)]


def start_board(logdir: Path, cache: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)}
    process = subprocess.Popen([sys.executable, "-m", "board", "--logdir", str(logdir), "--port", "0",
                                "--reload-interval", "0.5"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    for _ in range(100):
        found = re.search(r"http://([\d.]+):(\d+)", process.stdout.readline())
        if found:
            return process, found.group(0)
    process.kill()
    raise SystemExit("the board did not print its address")


async def get(host: str, port: int, path: str) -> tuple[float, int]:
    """(seconds, status) of one GET on a fresh connection, read to the end."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readline()
    await reader.read()  # the rest, until the server closes
    writer.close()
    return time.perf_counter() - started, int(head.split()[1])


async def load_phase(url: str, series: list[tuple[str, str]], clients: int, requests: int,
                     limit_s: float) -> tuple[list[float], int]:
    """Latencies of `requests` GETs spread over `clients` concurrent connections; stops early at `limit_s`."""
    host, port = url.removeprefix("http://").split(":")
    latencies: list[float] = []
    failures = 0
    remaining = requests
    deadline = time.perf_counter() + limit_s
    rng = random.Random(1)

    async def client() -> None:
        nonlocal remaining, failures
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            run, tag = rng.choice(series)
            try:
                seconds, status = await get(host, int(port), "/api/scalars?" + urlencode({"run": run, "tag": tag}))
            except OSError:
                failures += 1
                continue
            if status != 200:
                failures += 1
            latencies.append(seconds)

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, failures


def wait_loaded(url: str, runs: int) -> None:
    import json
    import urllib.request

    for _ in range(1200):
        try:
            with urllib.request.urlopen(url + "/api/runs", timeout=30) as response:
                body = json.load(response)
            if body["loaded"] and len(body["runs"]) == runs:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the board did not load the directory")


def row(name: str, latencies: list[float], failures: int, elapsed_s: float) -> tuple[str, float]:
    ms = np.asarray(latencies) * 1000
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    line = (f"{name:<8} {len(ms):>8} {failures:>8} {len(ms) / elapsed_s:>8.0f} {p50:>9.1f} {p90:>9.1f} {p99:>9.1f}"
            f" {ms.max():>9.1f}")
    return line, float(p99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int, default=3000, help="requests per phase")
    parser.add_argument("--runs", type=int, default=8, help="static runs")
    parser.add_argument("--live-runs", type=int, default=4, help="runs the live writer appends to")
    parser.add_argument("--tags", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5000, help="points per tag written before the phases")
    parser.add_argument("--writer-pause-s", type=float, default=0.0,
                        help="pause between the live writer's steps (0: as fast as it can)")
    parser.add_argument("--phase-limit-s", type=float, default=120.0)
    parser.add_argument("--keep", action="store_true", help="leave the board running after the live phase (profiling)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="board_load_") as work:
        logdir, cache = Path(work) / "logs", Path(work) / "cache"
        started = time.perf_counter()
        series = write_logdir(logdir, args.runs, args.live_runs, args.tags, args.steps)
        print(f"log directory: {args.runs}+{args.live_runs} runs × {args.tags} tags × {args.steps} steps "
              f"({len(series) * args.steps:,} points) written in {time.perf_counter() - started:.1f} s")
        board, url = start_board(logdir, cache)
        writer = None
        try:
            wait_loaded(url, args.runs + args.live_runs)
            print(f"board pid {board.pid} at {url}", flush=True)
            print(f"{args.clients} clients, {args.requests} requests per phase, GET /api/scalars (every point of a "
                  f"random series; {args.steps} points each at the start)")
            print(f"{'phase':<8} {'answered':>8} {'failed':>8} {'req/s':>8} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9}"
                  f" {'max ms':>9}")
            p99s = {}
            for phase in ("static", "live"):
                if phase == "live":
                    writer = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(logdir), str(args.live_runs),
                                               str(args.tags), str(args.steps), str(args.writer_pause_s)],
                                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
                    time.sleep(2.0)  # the writer has flushed and the board has reloaded a few times
                phase_started = time.perf_counter()
                latencies, failures = asyncio.run(load_phase(url, series, args.clients, args.requests,
                                                             args.phase_limit_s))
                line, p99s[phase] = row(phase, latencies, failures, time.perf_counter() - phase_started)
                print(line, flush=True)
            print(f"live p99 / static p99 = {p99s['live'] / p99s['static']:.2f} (target ≤ 3)")
            if args.keep:
                print(f"board still serving at {url} (pid {board.pid}); Ctrl-C to stop", flush=True)
                signal.pause()
        finally:
            if writer is not None:
                writer.send_signal(signal.SIGINT)
                try:
                    writer.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    writer.kill()
            board.terminate()
            try:
                board.wait(timeout=30)
            except subprocess.TimeoutExpired:
                board.kill()


if __name__ == "__main__":
    main()
