"""`python -m board.data.worker LOGDIR CACHE_ROOT RUN...`: decode runs into the cache, in a separate process.

The store starts a few of these to read a large log directory on several cores. They hand their results
over through the cache files only (no pickling between processes); the store then maps those files.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from board.data.cache import run_cache_dir
from board.data.discovery import discover_runs, run_group
from board.data.run import RunState


def load_into_cache(logdir: Path, cache_root: Path, runs: list[str]) -> list[str]:
    """Decode `runs` into the cache, each on its own: one that fails is reported (one line on stderr) and left
    uncached for the board to read itself, and the others are decoded all the same. Each run's name is written
    to stdout (a JSON string a line) once it is done, cached or failed, so the board can map it at once.
    Returns the failed runs."""
    locations = discover_runs(logdir)
    failed = []
    for name in runs:
        location = locations.get(name)
        if location is None:
            continue
        try:
            state = RunState(name, run_group(name), location.path, run_cache_dir(cache_root, logdir, name))
            state.refresh(location.event_files)
            state.save_cache_if_grown()
        except Exception as error:  # NOTE: the board reads this run itself and shows why it failed
            print(f"board worker: run {name}: {type(error).__name__}: {error}", file=sys.stderr)
            failed.append(name)
        print(json.dumps(name), flush=True)
    return failed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    load_into_cache(Path(argv[0]), Path(argv[1]), argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
