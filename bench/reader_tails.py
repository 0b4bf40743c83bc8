"""How fast the event-file reader skips a 256 MiB zero-filled or random tail, against plainly reading the file.

    .venv/bin/python bench/reader_tails.py [--tail-mib 256]

Writes under .bench/reader_tails/ an event file of 10,000 scalar records followed by a tail of zeros, then one
followed by random bytes, and one followed by an absurd length header (2**64-1, valid CRC) and the random bytes.
For each, in this run: seconds and peak RSS growth of `EventFileReader.read_columns()`, and the seconds of the
peer — reading the same file in 16 MiB chunks and computing its CRC-32C (the unavoidable part: bytes from the
page cache, touched once). The target is ≤ 2 s for the 256 MiB tail. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
from google_crc32c import extend

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WORK = REPO / ".bench" / "reader_tails"


def write(path: Path, tail: str, tail_bytes: int) -> None:
    from instrumentation.format import frame_records, masked_crc32c, protos

    summary = protos.Summary
    records = [protos.Event(step=step, wall_time=1.7e9 + step, summary=summary(value=[summary.Value(
        tag="loss", simple_value=1.0 / step)])).SerializeToString() for step in range(1, 10_001)]
    rng = np.random.default_rng(0)
    with open(path, "wb") as file:
        file.write(frame_records(records))
        if tail == "absurd length":
            length = struct.pack("<Q", 2**64 - 1)
            file.write(length + struct.pack("<I", masked_crc32c(length)))
        for _ in range(tail_bytes >> 24):
            file.write(bytes(1 << 24) if tail == "zeros" else rng.bytes(1 << 24))


def read_and_crc(path: Path) -> float:
    started = time.perf_counter()
    crc = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 24):
            crc = extend(crc, chunk)
    return time.perf_counter() - started


class PeakRss:
    """The highest RSS of this process while the block runs, sampled every 5 ms."""

    def __enter__(self) -> PeakRss:
        self.process, self.peak, self._stop = psutil.Process(), 0, threading.Event()
        self.before = self.process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.005)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    from instrumentation.format import EventFileReader

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tail-mib", type=int, default=256)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| tail | file | reader s | read+CRC s | ratio | peak RSS growth | points | problem |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for tail in ("zeros", "random", "absurd length"):
        path = WORK / f"events.out.tfevents.{tail.replace(' ', '_')}.{args.tail_mib}"
        if not path.exists():
            write(path, tail, args.tail_mib << 20)
        peer = min(read_and_crc(path) for _ in range(2))  # the second run reads from the page cache too
        with PeakRss() as rss:
            started = time.perf_counter()
            reader = EventFileReader(path)
            batch = reader.read_columns()
            seconds = time.perf_counter() - started
        growth = rss.peak - rss.before
        print(f"| {tail} | {path.stat().st_size / 2**20:.0f} MiB | {seconds:.2f} | {peer:.2f} | "
              f"{seconds / peer:.1f} | {growth / 2**20:.0f} MiB | {len(batch):,} | {reader.problem} |", flush=True)


if __name__ == "__main__":
    main()
