"""The decoded-column cache: a re-open maps saved columns, resumes reading at the saved offsets, never trusts
a cache entry whose files changed, and decoding in worker processes gives the same points."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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


def test_each_run_a_worker_decoded_is_served_while_the_workers_go_on(tmp_path: Path, monkeypatch) -> None:
    import board.data.store as store_module

    logdir = tmp_path / "logs"
    for run in ("a", "b", "c", "d"):
        write_scalars(logdir / run, "loss", np.arange(200), np.zeros(200))
    events: list[str] = []
    publish, decode = LogdirStore._publish, LogdirStore._decode_in_workers

    def recording_publish(self, name, location):
        publish(self, name, location)
        events.append(f"published {name}" + (" (served)" if name in {s.name for s in self.runs()} else ""))

    def recording_decode(self, runs, decoded):
        decode(self, runs, decoded)
        events.append("workers done")

    monkeypatch.setattr(store_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(LogdirStore, "_publish", recording_publish)
    monkeypatch.setattr(LogdirStore, "_decode_in_workers", recording_decode)
    parallel = store(logdir, tmp_path / "cache", workers=2)
    # every run was mapped and served as its worker reported it, before the workers were all done
    assert events[-1] == "workers done" and len(events) == 5
    assert sorted(events[:4]) == [f"published {run} (served)" for run in "abcd"]
    assert all(len(parallel.scalars(run, "loss")[0]) == 200 for run in "abcd")


def test_a_worker_reports_each_run_on_its_own_line_as_json_once_done(tmp_path: Path, capsys) -> None:
    from board.data import worker

    logdir = tmp_path / "logs"
    for run in ("a", "new\nline"):
        write_scalars(logdir / run, "loss", np.arange(10), np.zeros(10))
    assert worker.load_into_cache(logdir, tmp_path / "cache", ["new\nline", "a", "missing"]) == []
    assert capsys.readouterr().out == '"new\\nline"\n"a"\n'


def test_an_in_place_edit_past_the_first_4_kib_at_the_same_length_is_not_served_from_the_cache(tmp_path: Path) -> None:
    logdir, cache_root = tmp_path / "logs", tmp_path / "cache"
    path = logdir / "run" / EVENTS
    path.parent.mkdir(parents=True)
    records = [scalar_record("x", s, 1.0) for s in range(400)]
    path.write_bytes(version_record() + b"".join(records))
    assert len(store(logdir, cache_root).scalars("run", "x")[0]) == 400
    assert len(list(cache_root.glob("*/*/manifest.json"))) == 1
    # The same record rewritten with another value, far past 4 KiB and in place: same length, same size.
    edited = version_record() + b"".join(records[:350]) + scalar_record("x", 350, 9.0) + b"".join(records[351:])
    assert len(edited) == path.stat().st_size and edited.index(scalar_record("x", 350, 9.0)) > 3 * 4096
    with open(path, "r+b") as file:
        file.write(edited)
    values = store(logdir, cache_root).scalars("run", "x")[0].values
    assert values[350] == 9.0 and values.tolist().count(1.0) == 399


def test_the_cache_hashes_every_byte_it_read_and_only_those(tmp_path: Path) -> None:
    from google_crc32c import value as crc32c

    from board.data.cache import PREFIX_CHUNK_BYTES, prefix_crc32c

    path = tmp_path / "file"
    data = np.random.default_rng(1).integers(0, 256, PREFIX_CHUNK_BYTES + 5000, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    for length in (0, 1, 4097, PREFIX_CHUNK_BYTES, PREFIX_CHUNK_BYTES + 4000):
        assert prefix_crc32c(path, length) == crc32c(data[:length])
    with pytest.raises(OSError, match="shorter"):
        prefix_crc32c(path, len(data) + 1)
