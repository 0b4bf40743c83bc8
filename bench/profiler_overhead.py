"""Profiler cost: digits-MLP step time with the profiler off / recording vs torch.profiler on the same PyTorch MLP,
trace bytes per step, and the time the Profile page needs to open a 1M-event trace with its top-ops table.

Run ``python bench/profiler_overhead.py [--repeats 41] [--steps 100] [--events 1000000]``. Everything runs in one
process. Each repeat times the five configurations back to back (the engine's three and the torch pair, each in
rotating order: each configuration takes every place in turn); a profiler's ratio is taken within
each repeat (profiled / off of the same repeat) and the median of those ratios reported, with their quartiles.
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

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
import instrumentation  # noqa: E402
from engine import hooks, nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from instrumentation.format import trace as fmt  # noqa: E402

BATCH = 32
TARGET_RATIO = 1.10
TARGET_OPEN_S = 3.0


def engine_step() -> Callable[[], None]:
    engine.manual_seed(0)
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = engine.tensor(x[:BATCH]), engine.tensor(y[:BATCH])

    def step() -> None:
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()
    return step


def torch_step(torch: Any) -> Callable[[], None]:
    torch.manual_seed(0)
    (x, y), _ = engine.datasets.load_digits(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()
    return step


def timed_ms(step: Callable[[], None], steps: int, around: Callable[[], Any] | None = None) -> float:
    """ms per step; ``around()`` gives a context manager entered outside the timed loop (its exit is not timed).

    NOTE: the heap is collected first (untimed). torch.profiler's results are cyclic garbage worth ~200 ms of
    collection; left in place, the next configuration that allocates enough to start a collection pays for them
    (that was the engine-recording row: 4-5x instead of ~1.3x)."""
    gc.collect()
    context = around() if around is not None else None
    if context is not None:
        context.__enter__()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    elapsed = time.perf_counter() - start
    if context is not None:
        context.__exit__(None, None, None)
    return elapsed * 1e3 / steps


def step_ratios(args: argparse.Namespace) -> tuple[dict[str, float], dict[str, Any]]:
    import torch

    torch.set_num_threads(1)  # NOTE: tiny matrices; more threads only add contention on a shared machine

    ours, theirs = engine_step(), torch_step(torch)
    activities = [torch.profiler.ProfilerActivity.CPU]
    torch_profiler = lambda: torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=True)  # noqa: E731
    # mid-cycle of a schedule: the profiler follows the engine's step ends (the cycle ends after the block)
    scheduled = lambda: instrumentation.profile(schedule=instrumentation.schedule(wait=0, warmup=0, active=10**9))  # noqa: E731
    for _ in range(args.warmup):
        ours(), theirs()
    groups = [(ours, [("engine off", None), ("engine recording", instrumentation.profile),
                      ("engine recording, scheduled", scheduled)]),
              (theirs, [("torch off", None), ("torch.profiler", torch_profiler)])]
    runs: dict[str, list[float]] = {name: [] for _, configs in groups for name, _ in configs}
    for repeat in range(args.repeats):
        for step, configs in groups:
            shift = repeat % len(configs)  # NOTE: each configuration takes every place in the order in turn
            for name, around in configs[shift:] + configs[:shift]:
                runs[name].append(timed_ms(step, args.steps, around))
    ratios = {name: [p / o for p, o in zip(runs[name], runs[configs[0][0]])] for _, configs in groups
              for name, _ in configs[1:]}
    medians = {name: statistics.median(values) for name, values in runs.items()}
    with tempfile.TemporaryDirectory() as directory:
        prof = instrumentation.profile(directory)
        with prof:
            for _ in range(args.steps):
                ours()
            export_start = time.perf_counter()
        export_s = time.perf_counter() - export_start  # what a schedule's last step of a cycle pays, once per cycle
        trace_bytes = os.path.getsize(prof.traces_written[0])
        events = len(prof.last_trace["traceEvents"])
    return medians, {"ratios": ratios, "trace_bytes_per_step": trace_bytes / args.steps, "events_per_step": events / args.steps,
                     "export_ms": export_s * 1e3,
                     "sample_trace": prof.last_trace}


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--open-repeats", type=int, default=3, help="interleaved opens of the big trace, each way")
    parser.add_argument("--open-only", action="store_true", help="skip the step-time rows (uses a short sample run)")
    parser.add_argument("--skip-open", action="store_true", help="only the step-time rows (no big-trace opening)")
    args = parser.parse_args()
    limits = single_threaded_blas()  # noqa: F841 - kept alive for the whole run
    load = os.getloadavg()[0]
    print(f"# profiler overhead (1 BLAS/torch thread): digits MLP 64-128-10, batch {BATCH}, {args.steps} steps x {args.repeats} interleaved "
          f"repeats (load average {load:.1f} on {os.cpu_count()} CPUs)")
    if args.open_only:
        step = engine_step()
        with instrumentation.profile() as prof:
            for _ in range(args.steps):
                step()
        return open_report(prof.last_trace, args)
    medians, extra = step_ratios(args)
    print(f"{'configuration':<28} {'ms/step':>9} {'ratio':>7} {'ratio p25-p75':>15}  (ratio: median over repeats of profiled/off)")
    ratios = extra["ratios"]
    for name, value in medians.items():
        if name in ratios:
            quartiles = statistics.quantiles(ratios[name], n=4)
            print(f"{name:<28} {value:>9.3f} {statistics.median(ratios[name]):>6.2f}x {quartiles[0]:>7.2f}-{quartiles[2]:.2f}x")
        else:
            print(f"{name:<28} {value:>9.3f} {1.0:>6.2f}x")
    ours = statistics.median(ratios["engine recording"])
    theirs = statistics.median(ratios["torch.profiler"])
    verdict = "meets" if ours <= TARGET_RATIO and ours <= theirs else "MISSES"
    print(f"recording ratio {ours:.2f}x vs target <= {TARGET_RATIO:.2f}x and <= torch.profiler's {theirs:.2f}x: {verdict}")
    print(f"trace bytes per step (gzip): {extra['trace_bytes_per_step']:.0f}; events per step: {extra['events_per_step']:.0f}")
    print(f"cycle-end export of {args.steps} steps (build + gzip write + columns sidecar; paid once per cycle, by the cycle's last step "
          f"under a schedule; not in the rows above): {extra['export_ms']:.1f} ms")
    return 0 if args.skip_open else open_report(extra["sample_trace"], args)


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
