"""The Scalars filter's regex engine on a catastrophic pattern: RE2 (ours) against Python's re, same machine, same run.

`^([\\w/]+)+!` against a tag of n word characters and no '!': Python's re backtracks through 2^n splits (the
issue measured 62 s at n=30, ×4 per 2 characters); RE2 scans once. Python's re is timed only at small n.

    python bench/board_filters.py
"""
from __future__ import annotations

import re
import time

from board.data.filters import compile_filter

PATTERN = r"^([\w/]+)+!"


def seconds_per_search(search, text: str, repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        search(text)
    return (time.perf_counter() - started) / repeats


def main() -> None:
    ours = compile_filter(PATTERN).search
    python = re.compile(PATTERN).search
    print(f"pattern {PATTERN!r} against 'a' * n")
    print(f"{'n':>6} {'RE2 µs':>10} {'re µs':>12}")
    timings: dict[int, float] = {}
    for n in (14, 16, 18, 20, 30, 60, 1000, 10_000):
        timings[n] = seconds_per_search(ours, "a" * n, 2000)
        reference = f"{seconds_per_search(python, 'a' * n, 3) * 1e6:12.0f}" if n <= 20 else f"{'(skipped)':>12}"
        print(f"{n:>6} {timings[n] * 1e6:10.2f} {reference}")
    print(f"RE2 time ratio 60 vs 30 characters: {timings[60] / timings[30]:.2f} (linear: ≤ 2; Python's re: ≈ 4^15)")
    print(f"RE2 time ratio 10000 vs 1000 characters: {timings[10_000] / timings[1000]:.2f} (linear: ≈ 10)")


if __name__ == "__main__":
    main()
