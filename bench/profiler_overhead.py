"""Profiler cost: MLP step time with the profiler off / recording (trace export included) vs torch.profiler on the
same PyTorch MLP, per row of the target, and the time the Profile page needs to open a 1M-event trace.

Run ``python bench/profiler_overhead.py [--rows all] [--repeats 9] [--cycle-steps 100] [--events 1000000]``.
Rows (``bench/mlp_rows.py``): MLPs 64-W-W-10 of widths 64-512 trained with Adam at batch sizes 32-128, plus
``digits`` (the one-hidden-layer MLP of earlier figures). A profiled measurement is one capture of
``--cycle-steps`` steps: ``profile(logdir)`` entered, the steps run, and its exit (building the trace, writing it
gzipped with its columns sidecar) timed with them, so the export is amortised over the cycle's steps. The peer is
``torch.profiler`` (CPU activity, shapes and memory recorded) on the same PyTorch model, its ``export_chrome_trace``
included. Each repeat times a row's four configurations back to back in rotating order (each takes every place in
turn); a profiler's ratio is taken within each repeat (profiled / off of the same repeat) and the median of those
ratios reported, with their quartiles. Everything runs in one process, one BLAS and torch thread.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import instrumentation  # noqa: E402
from bench import mlp_rows  # noqa: E402
from instrumentation.format import trace as fmt  # noqa: E402

TARGET_RATIO = 1.10
TARGET_OPEN_S = 3.0


def engine_step(row: tuple[int, int] | None = mlp_rows.DIGITS) -> Callable[[], None]:
    return mlp_rows.engine_step(row)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # --clock cpu: this process's CPU time (time descheduled on a loaded machine not counted)


def timed_ms(step: Callable[[], None], steps: int, around: Callable[[], Any] | None = None) -> tuple[float, float]:
    """(ms per step with ``around``'s exit included, ms of that exit); ``around()`` gives a context manager entered
    outside the timed loop (its exit, the export, is timed).

    NOTE: the heap is collected first (untimed). torch.profiler's results are cyclic garbage worth ~200 ms of
    collection; left in place, the next configuration that allocates enough to start a collection pays for them."""
    gc.collect()
    context = around() if around is not None else None
    if context is not None:
        context.__enter__()
    start = clock()
    for _ in range(steps):
        step()
    steps_done = clock()
    if context is not None:
        context.__exit__(None, None, None)
    end = clock()
    return (end - start) * 1e3 / steps, (end - steps_done) * 1e3


class _TorchCapture:
    """torch.profiler around the steps; its exit writes the Chrome trace (the peer of ``profile(logdir)``)."""

    def __init__(self, torch: Any, directory: str) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        self.profiler = torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=True)
        self.path = os.path.join(directory, "torch_trace.json")

    def __enter__(self) -> None:
        self.profiler.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.profiler.__exit__(None, None, None)
        self.profiler.export_chrome_trace(self.path)


CONFIGS = ("engine off", "engine profiled", "torch off", "torch.profiler")


def row_runs(row: tuple[int, int] | None, args: argparse.Namespace, directory: str) -> dict[str, Any]:
    """A row's interleaved repeats: per configuration its ms/step, per profiler its ratios and export ms."""
    import torch

    ours, theirs = mlp_rows.engine_step(row), mlp_rows.torch_step(torch, row)
    for _ in range(args.warmup):
        ours(), theirs()
    groups = [(ours, [("engine off", None), ("engine profiled", lambda: instrumentation.profile(directory))]),
              (theirs, [("torch off", None), ("torch.profiler", lambda: _TorchCapture(torch, directory))])]
    runs: dict[str, list[float]] = {name: [] for name in CONFIGS}
    exports: dict[str, list[float]] = {"engine profiled": [], "torch.profiler": []}
    for repeat in range(args.repeats):
        for step, configs in groups:
            shift = repeat % len(configs)  # NOTE: each configuration takes every place in the order in turn
            for name, around in configs[shift:] + configs[:shift]:
                ms, export_ms = timed_ms(step, args.cycle_steps, around)
                runs[name].append(ms)
                if name in exports:
                    exports[name].append(export_ms)
    ratios = {"engine profiled": [p / o for p, o in zip(runs["engine profiled"], runs["engine off"])],
              "torch.profiler": [p / o for p, o in zip(runs["torch.profiler"], runs["torch off"])]}
    return {"ms": {name: statistics.median(values) for name, values in runs.items()}, "ratios": ratios,
            "export_ms": {name: statistics.median(values) for name, values in exports.items()}}


def _quartiles(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f}-{values[0]:.2f}"
    low, _, high = statistics.quantiles(values, n=4)
    return f"{low:.2f}-{high:.2f}"


def step_table(args: argparse.Namespace) -> tuple[bool, dict[str, Any]]:
    """Print one line per row as it is measured; returns (every row meets the target, a sample trace)."""
    import torch

    torch.set_num_threads(1)  # NOTE: tiny matrices; more threads only add contention on a shared machine
    print(f"{'row':<8} {'off ms':>8} {'prof ms':>8} {'export':>7} {'ratio':>6} {'p25-p75':>10}  "
          f"{'torch off':>9} {'t.prof':>8} {'ratio':>6} {'p25-p75':>10}  target")
    print(f"{'':<8} {'/step':>8} {'/step':>8} {'ms/cyc':>7}")
    meets = True
    with tempfile.TemporaryDirectory() as directory:
        for row in args.rows:
            result = row_runs(row, args, directory)
            ms, ratios, exports = result["ms"], result["ratios"], result["export_ms"]
            ours, theirs = statistics.median(ratios["engine profiled"]), statistics.median(ratios["torch.profiler"])
            verdict = "meets" if ours <= TARGET_RATIO else "MISSES"
            meets = meets and ours <= TARGET_RATIO
            print(f"{mlp_rows.row_name(row):<8} {ms['engine off']:>8.3f} {ms['engine profiled']:>8.3f} "
                  f"{exports['engine profiled']:>7.1f} {ours:>5.2f}x {_quartiles(ratios['engine profiled']):>10}  "
                  f"{ms['torch off']:>9.3f} {ms['torch.profiler']:>8.3f} {theirs:>5.2f}x "
                  f"{_quartiles(ratios['torch.profiler']):>10}  {verdict}", flush=True)
        step = mlp_rows.engine_step(args.rows[0])
        with instrumentation.profile(directory) as prof:
            for _ in range(args.cycle_steps):
                step()
        trace_bytes = os.path.getsize(prof.traces_written[-1])
        events = len(prof.last_trace["traceEvents"])
    print(f"row {mlp_rows.row_name(args.rows[0])}: trace bytes per step (gzip) {trace_bytes / args.cycle_steps:.0f}, "
          f"events per step {events / args.cycle_steps:.0f}")
    return meets, prof.last_trace


def big_trace(sample: dict[str, Any], events: int) -> dict[str, Any]:
    """``events`` events in the real layout: the sample capture's ops and spans repeated, shifted in time and step."""
    source = [e for e in sample["traceEvents"] if e.get("ph") in ("X", "C")]
    period_us = max(e["ts"] + e.get("dur", 0.0) for e in source) + 1.0
    steps = len(sample["metadata"]["steps"]) or 1
    out: list[dict[str, Any]] = [e for e in sample["traceEvents"] if e.get("ph") == "M"]
    copy = 0
    while len(out) < events:
        shift, step_shift = copy * period_us, copy * steps
        for event in source:
            clone = dict(event, ts=event["ts"] + shift)
            if "step" in event.get("args", {}):
                clone["args"] = dict(event["args"], step=event["args"]["step"] + step_shift)
            if event.get("cat") == "step":
                clone["name"] = f"step {clone['args']['step']}"
            out.append(clone)
        copy += 1
    return {"traceEvents": out[:events], "displayTimeUnit": "ms", "metadata": sample["metadata"]}


def open_big_trace(sample: dict[str, Any], events: int, repeats: int = 3) -> dict[str, float]:
    """Open the capture as the board does (find, load, top-ops table), via the sidecar and via the JSON only.

    The capture is written by the profiler's own writer (trace + columns sidecar); the two ways of opening are
    interleaved ``repeats`` times and medians reported."""
    from board.data.profile import step_breakdown, top_ops
    from board.data.profile_captures import TraceCache, find_captures
    from instrumentation.format import trace_sidecar
    from instrumentation.profiler.export import write_capture

    def opened(use_sidecar: bool) -> tuple[float, Any]:
        gc.collect()
        start = time.perf_counter()
        (capture,) = find_captures(Path(directory)).values()
        columns = TraceCache(use_sidecar=use_sidecar).load(capture)
        rows = top_ops(columns, "op")
        assert rows and rows[0].calls > 0
        return time.perf_counter() - start, columns

    with tempfile.TemporaryDirectory() as directory:
        trace = big_trace(sample, events)
        start = time.perf_counter()
        path = write_capture(directory, trace)
        write_s = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as elsewhere:  # not under `directory`: it would be the newest capture
            start = time.perf_counter()
            write_capture(elsewhere, trace, sidecar=False)
            write_json_s = time.perf_counter() - start
        del trace
        runs: dict[str, list[float]] = {"sidecar": [], "json": [], "parse": []}
        for _ in range(repeats):
            elapsed, via_sidecar = opened(True)
            runs["sidecar"].append(elapsed)
            elapsed, via_json = opened(False)
            runs["json"].append(elapsed)
            gc.collect()
            start = time.perf_counter()
            fmt.read_trace(path)
            runs["parse"].append(time.perf_counter() - start)
        assert [(r.key, r.calls, r.self_us) for r in top_ops(via_sidecar)] == \
            [(r.key, r.calls, r.self_us) for r in top_ops(via_json)]
        start = time.perf_counter()
        step_breakdown(via_sidecar)
        breakdown_s = time.perf_counter() - start
        return {"open via sidecar + top-ops table (s)": statistics.median(runs["sidecar"]),
                "open via JSON only + top-ops table (s)": statistics.median(runs["json"]),
                "of which gunzip + JSON parse (s)": statistics.median(runs["parse"]),
                "step breakdown (s)": breakdown_s,
                "trace MiB (gzip)": os.path.getsize(path) / 2**20,
                "sidecar MiB": os.path.getsize(trace_sidecar.sidecar_path(path)) / 2**20,
                "write trace + sidecar (s, once per capture)": write_s,
                "write trace only (s)": write_json_s}


def single_threaded_blas() -> Any:
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl.threadpool_limits(1)


def _load() -> str:
    """1, 5 and 15-minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="all", help="all, or digits and/or WIDTHxBATCH, comma-separated")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--cycle-steps", type=int, default=100, help="steps per capture (export amortised over them)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="cpu: process CPU time, steadier than wall time when the machine is shared")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--open-repeats", type=int, default=3, help="interleaved opens of the big trace, each way")
    parser.add_argument("--open-only", action="store_true", help="skip the step-time rows (uses a short sample run)")
    parser.add_argument("--skip-open", action="store_true", help="only the step-time rows (no big-trace opening)")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    args.rows = list(mlp_rows.ROWS) if args.rows == "all" else [mlp_rows.parse_row(r) for r in args.rows.split(",")]
    limits = single_threaded_blas()  # noqa: F841 - kept alive for the whole run
    print(f"# profiler overhead (1 BLAS/torch thread): MLPs 64-W-W-10 (row WxBATCH), Adam; {args.cycle_steps} steps "
          f"per capture x {args.repeats} interleaved repeats; {args.clock} clock; load average {_load()} on "
          f"{os.cpu_count()} CPUs")
    if args.open_only:
        step = engine_step()
        with instrumentation.profile() as prof:
            for _ in range(args.cycle_steps):
                step()
        return open_report(prof.last_trace, args)
    meets, sample = step_table(args)
    print(f"ratio: median over repeats of profiled/off; engine profiled = recording + trace export (build, gzip write, "
          f"columns sidecar: 'export ms/cyc', once per capture); target <= {TARGET_RATIO:.2f}x on every row: "
          f"{'meets' if meets else 'MISSES'}")
    print(f"# load average at the end: {_load()}")
    return 0 if args.skip_open else open_report(sample, args)


def open_report(sample: dict[str, Any], args: argparse.Namespace) -> int:
    print(f"# opening a {args.events:,}-event trace (orjson {'on' if fmt._orjson is not None else 'off'})")
    timings = open_big_trace(sample, args.events, args.open_repeats)
    for name, value in timings.items():
        print(f"{name:<46} {value:>8.2f}")
    for way in ("sidecar", "JSON only"):
        seconds = timings[f"open via {way} + top-ops table (s)"]
        verdict = "meets" if seconds <= TARGET_OPEN_S else "MISSES"
        print(f"open via {way} + top-ops table vs target <= {TARGET_OPEN_S:.0f} s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
