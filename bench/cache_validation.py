"""What validating the column cache by the CRC-32C of every byte read costs, against decoding and re-opening.

    .venv/bin/python bench/cache_validation.py [--runs N] [--tags N] [--steps N]

Generates a log directory under .bench/cache_validation/ (kept between runs; the default, 4 runs x 50 tags x 10k
steps, is a fifth of the 682 MiB directory of bench/board_ingest.py --large), then measures in this run: decoding it
without a cache, re-opening it from a warm cache, and within that re-opening the validation of every entry
(`cache.valid_manifest`, which hashes each event file up to the offset read). The files are in the page cache
(just written or read). A benchmark, not a test: the ratios are what to compare between machines.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
WORK = REPO / ".bench" / "cache_validation"


def main() -> None:
    from board_ingest import Shape, _write_run

    from board.data import cache
    from board.data.discovery import discover_runs
    from board.data.store import LogdirStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--tags", type=int, default=50)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    shape = Shape(f"r{args.runs}-t{args.tags}-s{args.steps}", args.runs, args.tags, args.steps, 0, 0)
    logdir, cache_root = WORK / shape.name, WORK / f"{shape.name}-cache"
    if not (logdir / ".complete").exists():
        shutil.rmtree(logdir, ignore_errors=True)
        for r in range(shape.runs):
            _write_run((logdir / f"run{r:02d}", shape, r))
        (logdir / ".complete").write_text("ok")
    shutil.rmtree(cache_root, ignore_errors=True)
    size = sum(p.stat().st_size for p in logdir.rglob("events.out.tfevents.*"))

    started = time.perf_counter()
    LogdirStore(logdir, workers=0).refresh()
    decode_s = time.perf_counter() - started
    LogdirStore(logdir, cache_root=cache_root, workers=0).refresh()  # writes the entries
    started = time.perf_counter()
    LogdirStore(logdir, cache_root=cache_root, workers=0).refresh()
    reopen_s = time.perf_counter() - started
    locations = discover_runs(logdir)
    started = time.perf_counter()
    for name, location in locations.items():
        assert cache.valid_manifest(cache.run_cache_dir(cache_root, logdir, name), location.path) is not None
    validate_s = time.perf_counter() - started

    print(f"{shape.runs} runs, {shape.points:,} scalar points, {size / 2**20:.0f} MiB of event files")
    print(f"decode without cache      {decode_s:7.3f} s")
    print(f"re-open from the cache    {reopen_s:7.3f} s")
    print(f"  of which validation     {validate_s:7.3f} s  ({size / 2**20 / validate_s:,.0f} MiB/s; "
          f"{validate_s / reopen_s:.0%} of the re-open, {validate_s / decode_s:.1%} of decoding)")
    print(f"validation for 682 MiB   ~{validate_s * 682 * 2**20 / size:7.3f} s (scaled)")


if __name__ == "__main__":
    main()
