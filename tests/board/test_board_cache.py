"""The decoded-column cache: a re-open maps saved columns, resumes reading at the saved offsets, never trusts
a cache entry whose files changed, and decoding in worker processes gives the same points."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from board.data.store import LogdirStore
from board_helpers import scalar_record, version_record, write_scalars

EVENTS = "events.out.tfevents.1700000000.host.1.0"


def store(logdir: Path, cache_root: Path, workers: int = 1) -> LogdirStore:
    result = LogdirStore(logdir, cache_root=cache_root, workers=workers)
    result.refresh()
    return result


def test_reopen_maps_the_cache_and_reads_only_what_was_appended(tmp_path: Path) -> None:
    logdir, cache_root = tmp_path / "logs", tmp_path / "cache"
    path = logdir / "run" / EVENTS
    path.parent.mkdir(parents=True)
    path.write_bytes(version_record() + b"".join(scalar_record("x", s, float(s)) for s in range(100)))
    first = store(logdir, cache_root)
    assert len(first.scalars("run", "x")[0]) == 100
    with open(path, "ab") as file:
        file.write(b"".join(scalar_record("x", s, float(s)) for s in range(100, 110)))
    second = store(logdir, cache_root)
    columns, _ = second.scalars("run", "x")
    assert columns.steps.tolist() == list(range(110))
    assert columns.values.tolist() == [float(s) for s in range(110)]


def test_a_rewritten_file_invalidates_the_entry(tmp_path: Path) -> None:
    logdir, cache_root = tmp_path / "logs", tmp_path / "cache"
    path = logdir / "run" / EVENTS
    path.parent.mkdir(parents=True)
    path.write_bytes(version_record() + b"".join(scalar_record("x", s, 1.0) for s in range(50)))
    store(logdir, cache_root)
    # Same name, same length or longer, different content: the cached offsets mean nothing any more.
    path.write_bytes(version_record(wall_time=1.8e9) + b"".join(scalar_record("x", s, 2.0) for s in range(60)))
    columns, _ = store(logdir, cache_root).scalars("run", "x")
    assert columns.values.tolist() == [2.0] * 60


def test_worker_processes_decode_the_same_points(tmp_path: Path, monkeypatch) -> None:
    import board.data.store as store_module

    logdir = tmp_path / "logs"
    rng = np.random.default_rng(0)
    expected = {}
    for run in ("a", "b", "c/rank0"):
        values = rng.normal(size=300)
        write_scalars(logdir / run, "loss", np.arange(300), values)
        expected[run] = values.astype(np.float32).astype(np.float64)
    monkeypatch.setattr(store_module, "PARALLEL_MIN_BYTES", 0)
    parallel = store(logdir, tmp_path / "cache", workers=2)
    assert len(list((tmp_path / "cache").glob("*/*/manifest.json"))) == 3  # written by the workers
    for run, values in expected.items():
        np.testing.assert_array_equal(parallel.scalars(run, "loss")[0].values, values)
        assert parallel.scalars(run, "loss")[0].steps.tolist() == list(range(300))
