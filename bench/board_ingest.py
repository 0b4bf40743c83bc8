"""How fast the board serves every point of a log directory, against TensorBoard serving its sample.

    .venv/bin/python bench/board_ingest.py [--large] [--skip-python-loader] [--repeat N]

Generates log directories under .bench/ (kept between runs), then for each one measures, in this run:
  - board: seconds from process start until `/api/scalars` has served every point of every tag, the peak RSS
    of its process tree (decoding workers included), its steady RSS per stored scalar point above an empty
    board, and the same time for a second opening of the directory (the decoded-column cache);
  - TensorBoard with its Rust loader (`--load_fast=true`, a 1000-point sample per tag, no checksums) and, for
    the small directory, its Python loader: seconds until `/data/plugin/scalars/scalars` serves every tag up to
    its last step, and peak RSS of the process tree;
  - the server time of the scalars chart callback on one 10M-point series (Dash's own callback route).
A benchmark, not a test: numbers depend on the machine; ratios are measured side by side in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WORK = REPO / ".bench" / "board_ingest"
TENSORBOARD = Path(sys.executable).with_name("tensorboard")


@dataclass(frozen=True)
class Shape:
    name: str
    runs: int
    tags: int
    steps: int
    histogram_tags: int
    histogram_steps: int

    @property
    def points(self) -> int:
        return self.runs * self.tags * self.steps

    def all_tags(self) -> list[tuple[str, str]]:
        return [(f"run{r:02d}", f"group{t % 5}/metric{t}") for r in range(self.runs) for t in range(self.tags)]

    def last_tags(self) -> list[tuple[str, str]]:
        """Every run's last scalar tag: the issue's measure ("every point of every run's last tag")."""
        return [(run, tag) for run, tag in self.all_tags() if tag.endswith(f"metric{self.tags - 1}")]


SMALL = Shape("small", 4, 10, 10_000, 5, 1_000)
LARGE = Shape("large", 20, 50, 10_000, 1, 1_000)  # + 20k histograms (one tag per run every 10 steps)


# ---- generating ---------------------------------------------------------------------------------------------
def _write_run(args: tuple[Path, Shape, int]) -> None:
    from instrumentation.format import FILE_VERSION, frame_records, protos

    run_dir, shape, seed = args
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    path = run_dir / f"events.out.tfevents.1700000000.bench.{seed}.0"
    with open(path, "wb") as file:
        records = [protos.Event(wall_time=1.7e9, file_version=FILE_VERSION).SerializeToString()]
        tags = [f"group{t % 5}/metric{t}" for t in range(shape.tags)]
        hist_every = shape.steps // shape.histogram_steps if shape.histogram_steps else 0
        for step in range(shape.steps):
            values = rng.normal(size=shape.tags).tolist()
            summary = protos.Summary
            for tag, value in zip(tags, values):
                records.append(protos.Event(wall_time=1.7e9 + step, step=step, summary=summary(
                    value=[summary.Value(tag=tag, simple_value=value)])).SerializeToString())
            if hist_every and step % hist_every == 0:
                for h in range(shape.histogram_tags):
                    counts, edges = np.histogram(rng.normal(size=4096), bins=512)  # ≈ 8 KiB a record, as in the issue
                    histo = protos.HistogramProto(min=float(edges[0]), max=float(edges[-1]), num=4096.0, sum=0.0,
                                                  sum_squares=4096.0, bucket_limit=edges[1:].tolist(),
                                                  bucket=counts.astype(float).tolist())
                    records.append(protos.Event(wall_time=1.7e9 + step, step=step, summary=summary(
                        value=[summary.Value(tag=f"weights/layer{h}", histo=histo)])).SerializeToString())
            if len(records) > 100_000:
                file.write(frame_records(records))
                records = []
        file.write(frame_records(records))


def generate(shape: Shape) -> Path:
    logdir = WORK / shape.name
    done = logdir / ".complete"
    if done.exists():
        return logdir
    shutil.rmtree(logdir, ignore_errors=True)
    started = time.perf_counter()
    jobs = [(logdir / f"run{r:02d}", shape, r) for r in range(shape.runs)]
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        list(pool.map(_write_run, jobs))
    done.write_text("ok")
    print(f"generated {shape.name}: {shape.points:,} scalar points in {time.perf_counter() - started:.0f} s",
          flush=True)
    return logdir


# ---- serving processes --------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=600) as response:
            return response.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


class PeakRss:
    """Samples the RSS of a process and its descendants every 20 ms; `peak` and `current` in bytes."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def current(self) -> int:
        total = 0
        try:
            for process in [self.process, *self.process.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
        except psutil.Error:
            pass
        return total

    def cpu_seconds(self) -> float:
        """User + system CPU time of the tree so far: the processes alive now and the children they reaped."""
        total = 0.0
        try:
            for process in [self.process, *self.process.children(recursive=True)]:
                try:
                    times = process.cpu_times()
                except psutil.Error:
                    continue
                total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def stop_tree(process: subprocess.Popen) -> None:
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        children = []
    process.terminate()
    for child in children:
        try:
            child.terminate()
        except psutil.Error:
            pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
    psutil.wait_procs(children, timeout=10)


def wait_until(condition, what: str, limit_s: float = 1800.0, pause_s: float = 0.02):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(pause_s)
    raise RuntimeError(f"gave up waiting for {what}")


# ---- the board ----------------------------------------------------------------------------------------------
def wait_for_tags(tags: list[tuple[str, str]], served, what: str) -> float:
    """perf_counter() once `served(run, tag)` held for every pair (each pair is asked until it holds, then no more)."""
    pending = set(tags)

    def all_served() -> bool:
        for pair in sorted(pending):
            if not served(*pair):
                return False
            pending.discard(pair)
        return True

    wait_until(all_served, what, pause_s=0.05)
    return time.perf_counter()


@dataclass(frozen=True)
class Served:
    seconds: float  # from process start until every point (or TensorBoard's sample) of every tag was served
    last_tags: float  # from process start until the same for every run's last tag (the measure)
    peak_rss: int
    steady_rss: int
    listening: float = 0.0  # from process start until the first HTTP answer
    load: float = 0.0  # the board's own account of its first pass over the directory (server side)
    last_tags_cpu: float = 0.0  # CPU seconds of the process tree until every run's last tag was served


def serve_board(logdir: Path, cache: Path, shape: Shape | None) -> Served:
    port = free_port()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "board", "--logdir", str(logdir), "--port", str(port),
                                "--reload-interval", "1"], cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    rss = PeakRss(process.pid)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: get(f"{base}/api/runs") is not None, "the board to listen")
        listening = time.perf_counter() - started
        if shape is None:  # an empty board: the memory baseline
            wait_until(lambda: (body := get(f"{base}/api/runs")) and json.loads(body)["loaded"], "empty board")
            get(f"{base}/scalars")
        else:
            def served(run: str, tag: str) -> bool:
                body = get(f"{base}/api/scalars?{urllib.parse.urlencode({'run': run, 'tag': tag})}")
                # the client parses fast too
                return body is not None and len(orjson.loads(body)["steps"]) == shape.steps

            last_tags = wait_for_tags(shape.last_tags(), served,
                                      "every point of the last tags from the board") - started
            last_tags_cpu = rss.cpu_seconds()
            wait_for_tags(shape.all_tags(), served, "every point from the board")
        seconds = time.perf_counter() - started
        load = json.loads(get(f"{base}/api/runs"))["first_load_seconds"] or 0.0
        time.sleep(0.5)
        steady = rss.current()
        return Served(seconds, 0.0 if shape is None else last_tags, rss.stop(), steady, listening, load,
                      0.0 if shape is None else last_tags_cpu)
    finally:
        rss.stop()
        stop_tree(process)


# ---- TensorBoard --------------------------------------------------------------------------------------------
def serve_tensorboard(logdir: Path, shape: Shape, load_fast: bool) -> Served:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen([str(TENSORBOARD), "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1",
                                f"--load_fast={'true' if load_fast else 'false'}", "--reload_interval", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rss = PeakRss(process.pid)
    base = f"http://127.0.0.1:{port}/data/plugin/scalars"
    def served(run: str, tag: str) -> bool:
        body = get(f"{base}/scalars?{urllib.parse.urlencode({'run': run, 'tag': tag})}")
        try:
            points = orjson.loads(body) if body is not None else None
        except ValueError:
            return False
        return bool(points) and points[-1][1] == shape.steps - 1

    try:
        what = f"TensorBoard (load_fast={load_fast})"
        last_tags = wait_for_tags(shape.last_tags(), served, what + ", last tags") - started
        last_tags_cpu = rss.cpu_seconds()
        seconds = wait_for_tags(shape.all_tags(), served, what) - started
        steady = rss.current()
        return Served(seconds, last_tags, rss.stop(), steady, last_tags_cpu=last_tags_cpu)
    finally:
        rss.stop()
        stop_tree(process)


# ---- the chart callback on one 10M-point series -------------------------------------------------------------
def chart_callback_ms(points: int = 10_000_000) -> dict[str, float]:
    """Server time of the scalars chart callback through Dash's route, on a run cached with `points` points."""
    from board.app import create_app
    from board.config import BoardConfig
    from board.data import cache
    from board.data.series import ScalarColumns, ScalarSeries
    from instrumentation.format import FILE_VERSION, frame_record, protos

    logdir = WORK / "callback" / "logs"
    cache_root = WORK / "callback" / "cache"
    shutil.rmtree(WORK / "callback", ignore_errors=True)
    run_dir = logdir / "big"
    run_dir.mkdir(parents=True)
    event_file = run_dir / "events.out.tfevents.1700000000.bench.0.0"
    event_file.write_bytes(frame_record(protos.Event(wall_time=1.7e9, file_version=FILE_VERSION).SerializeToString()))
    steps = np.arange(points, dtype=np.int64)
    values = np.cumsum(np.random.default_rng(0).normal(size=points))
    series = ScalarSeries(ScalarColumns(steps, 1.7e9 + steps * 0.01, values))
    size = event_file.stat().st_size
    mark = cache.FileMark(event_file.name, size, 0, cache.prefix_crc32c(event_file, size))
    cache.save(cache.run_cache_dir(cache_root, logdir, "big"), [mark], {"loss": series}, {}, None)
    del series, steps, values

    app = create_app(BoardConfig(logdir=logdir, cache_dir=cache_root))
    app.server.extensions["flowscope"].store.refresh()
    client = app.server.test_client()
    client.get("/scalars")
    graph = {"tag": "loss", "type": "scalars-graph"}
    state = {"tag": "loss", "type": "scalars-state"}
    zoom = {"tag": "loss", "type": "scalars-zoom"}
    [callback] = [c for c in client.get("/_dash-dependencies").get_json() if "scalars-graph" in c["output"]]

    def call(relayout: dict | None, smoothing: float, trigger: str) -> float:
        payload = {
            "output": callback["output"],
            "outputs": [{"id": graph, "property": "figure"}, {"id": state, "property": "data"}],
            "inputs": [{"id": zoom, "property": "data", "value": relayout and {"relayout": relayout, "x_axis": "step"}},
                       {"id": "scalars-smoothing", "property": "value", "value": smoothing},
                       {"id": "scalars-x-axis", "property": "value", "value": "step"},
                       {"id": "scalars-log-y", "property": "value", "value": []},
                       {"id": "scalars-run-filter", "property": "value", "value": ""},
                       {"id": "scalars-poll", "property": "n_intervals", "value": None}],
            "state": [{"id": graph, "property": "id", "value": graph},
                      {"id": state, "property": "data", "value": None}],
            "changedPropIds": [trigger],
        }
        started = time.perf_counter()
        response = client.post("/_dash-update-component", json=payload)
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.get_data(as_text=True)[:500]
        return elapsed

    zoom_key = json.dumps(zoom, separators=(",", ":"), sort_keys=True)
    cold = call(None, 0.6, "scalars-smoothing.value")  # smoothing the 10M points the first time
    full = [call(None, 0.6, "scalars-smoothing.value") for _ in range(5)]
    zooms = []
    for i in range(5):
        low = 1_000_000 * (i + 1)
        relayout = {"xaxis.range[0]": low, "xaxis.range[1]": low + 2_000_000}
        zooms.append(call(relayout, 0.6, f"{zoom_key}.data"))
    raw = [call(None, 0.0, "scalars-smoothing.value") for _ in range(5)]
    shutil.rmtree(WORK / "callback", ignore_errors=True)
    return {"cold": cold, "full": statistics.median(full), "zoom": statistics.median(zooms),
            "raw": statistics.median(raw)}


# ---- the table ----------------------------------------------------------------------------------------------
def mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def repeated_pairs(shape: Shape, logdir: Path, cache: Path, repeats: int) -> list[str]:
    """`repeats` more first opens of the board, each followed by TensorBoard (fast loader): on a shared machine the
    load changes between two measurements, so each pair gives ratios and the medians are reported."""
    pairs = []
    for _ in range(repeats):
        shutil.rmtree(cache, ignore_errors=True)
        board = serve_board(logdir, cache, shape)
        tensorboard = serve_tensorboard(logdir, shape, load_fast=True)
        pairs.append((board.seconds / tensorboard.seconds, board.last_tags / tensorboard.last_tags,
                      board.peak_rss / tensorboard.peak_rss, board.last_tags_cpu / tensorboard.last_tags_cpu,
                      board, tensorboard))
    rows = [f"- {repeats} more pairs (board first open, then TensorBoard --load_fast=true), ratios board/TensorBoard:"]
    for every, last, rss, cpu, board, tensorboard in pairs:
        rows.append(f"  - every tag {board.seconds:.2f}/{tensorboard.seconds:.2f} s = {every:.2f}, each run's last "
                    f"tag {board.last_tags:.2f}/{tensorboard.last_tags:.2f} s = {last:.2f} (CPU "
                    f"{board.last_tags_cpu:.1f}/{tensorboard.last_tags_cpu:.1f} s = {cpu:.2f}), peak RSS "
                    f"{mib(board.peak_rss)}/{mib(tensorboard.peak_rss)} = {rss:.2f}")
    rows.append("  - medians: every tag {:.2f}, each run's last tag {:.2f}, peak RSS {:.2f}, CPU to the last tags "
                "{:.2f}".format(*(statistics.median(pair[index] for pair in pairs) for index in range(4))))
    return rows


def bench_directory(shape: Shape, python_loader: bool, repeats: int = 0) -> list[str]:
    logdir = generate(shape)
    cache = WORK / f"cache-{shape.name}"
    shutil.rmtree(cache, ignore_errors=True)
    empty_dir = WORK / "empty"
    empty_dir.mkdir(parents=True, exist_ok=True)
    empty = serve_board(empty_dir, WORK / "cache-empty", None)
    first = serve_board(logdir, cache, shape)
    again = serve_board(logdir, cache, shape)
    fast = serve_tensorboard(logdir, shape, load_fast=True)
    slow = serve_tensorboard(logdir, shape, load_fast=False) if python_loader else None
    per_point = (first.steady_rss - empty.steady_rss) / shape.points
    event_bytes = sum(f.stat().st_size for f in logdir.rglob("events.*"))
    rows = [
        f"## {shape.name}: {shape.runs} runs × {shape.tags} scalar tags × {shape.steps:,} steps"
        + (f" + {shape.runs} × {shape.histogram_tags} histogram tags × {shape.histogram_steps:,} steps"
           if shape.histogram_tags else "")
        + f" ({shape.points:,} scalar points, {event_bytes / 2**20:.0f} MiB)",
        "| server | serves | s to every tag | ratio to TB fast | s to each run's last tag | ratio to TB fast "
        "| of which listening | peak RSS (tree) | ratio to TB fast |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[f"| {name} | {serves} | {run.seconds:.2f} | {run.seconds / fast.seconds:.2f} | {run.last_tags:.2f} | "
          f"{run.last_tags / fast.last_tags:.2f} | {run.listening:.2f} | {mib(run.peak_rss)} | "
          f"{run.peak_rss / fast.peak_rss:.2f} |"
          for name, serves, run in (
              ("board, first open", "every point", first), ("board, re-open", "every point", again),
              ("TensorBoard --load_fast=true", "1000-point sample/tag", fast),
              *([("TensorBoard --load_fast=false", "1000-point sample/tag", slow)] if slow else []))],
    ]
    rows += [
        "",
        "- `s to every tag` walks all tags one request at a time, so it includes each server's time per request "
        "(TensorBoard's is tens of ms); `s to each run's last tag` is mostly loading.",
        f"- CPU seconds of the process tree until each run's last tag was served (less sensitive to other load on "
        f"the machine than wall time): board first open {first.last_tags_cpu:.1f}, TensorBoard "
        f"{fast.last_tags_cpu:.1f} = {first.last_tags_cpu / fast.last_tags_cpu:.2f}",
        f"- opening the directory (the board's first pass, server side): first {first.load:.2f} s, "
        f"re-open {again.load:.2f} s = {again.load / first.load:.1%} (target ≤ 10 %)",
        f"- re-open / first open counting until every point was served: {again.seconds / first.seconds:.1%} from "
        f"process start, {(again.seconds - again.listening) / (first.seconds - first.listening):.1%} from the first "
        "HTTP answer (both include serving all points as JSON, the same work in both)",
        f"- board steady RSS above an empty board: {(first.steady_rss - empty.steady_rss) / 2**20:.0f} MiB "
        f"= {per_point:.1f} bytes per stored scalar point (target ≤ 32); empty board {mib(empty.steady_rss)}",
        *(repeated_pairs(shape, logdir, cache, repeats) if repeats else []),
        "",
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help=f"also the {LARGE.points:,}-point directory")
    parser.add_argument("--skip-python-loader", action="store_true", help="skip TensorBoard's slow Python loader")
    parser.add_argument("--repeat", type=int, default=0, metavar="N",
                        help="N more board/TensorBoard pairs on the large directory, and the median ratios")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB", flush=True)
    lines = bench_directory(SMALL, python_loader=not args.skip_python_loader)
    print("\n".join(lines), flush=True)
    if args.large:
        large = bench_directory(LARGE, python_loader=False, repeats=args.repeat)
        print("\n".join(large), flush=True)
        lines += large
    timings = chart_callback_ms()
    callback = [
        "## scalars chart callback, one 10,000,000-point series (server time via /_dash-update-component)",
        f"- first call with smoothing 0.6 (EMA of all 10M points, then cached): {timings['cold']:.0f} ms",
        f"- whole series, smoothing 0.6 (cached): {timings['full']:.0f} ms (target ≤ 200)",
        f"- zoom to a 2M-point window, smoothing 0.6: {timings['zoom']:.0f} ms",
        f"- whole series, no smoothing: {timings['raw']:.0f} ms",
    ]
    print("\n".join(callback), flush=True)


if __name__ == "__main__":
    main()
