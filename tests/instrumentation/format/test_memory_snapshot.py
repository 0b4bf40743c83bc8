"""The memory snapshot contract: gzip JSON round trips, atomic names, readable errors, listing order."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from instrumentation.format.memory_snapshot import (AllocatorState, HistoryEntry, MemoryBlock, MemorySnapshot,
                                                    Requested, SnapshotHeader, list_snapshots, new_capture_id,
                                                    read_snapshot, read_snapshot_header, write_snapshot)

SNAPSHOT = MemorySnapshot(
    device="cpu", reason="oom", step=7, wall_time=1.7e9,
    allocator=AllocatorState(allocated=1000, reserved=1000, peak=1200, limit=1024, largest_free_block=24),
    blocks=(MemoryBlock(600, (10, 15), "float32", "Linear", "fc1", 6, ("train.py:12 step",), "activation"),
            MemoryBlock(400, (100,), "float32", "init", "", 0, (), "parameter")),
    history=(HistoryEntry(0.5, "alloc", 600, "Linear", 6),), requested=Requested(64, "ReLU", "act"))


def test_round_trip_is_plain_gzip_json(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, SNAPSHOT, "2026_01_02_03_04_05")
    assert path.endswith("plugins/memory/2026_01_02_03_04_05.snapshot.json.gz")
    with gzip.open(path, "rt") as handle:
        record = json.load(handle)  # the schema of LOGFORMAT.md, readable by anyone
    assert record["requested"] == {"bytes": 64, "op": "ReLU", "module": "act"}
    assert record["blocks"][0]["stack"] == ["train.py:12 step"] and record["allocator"]["largest_free_block"] == 24
    assert read_snapshot(path) == SNAPSHOT


def test_capture_ids_never_collide_and_list_in_time_order(tmp_path: Path) -> None:
    first = new_capture_id(tmp_path, 1.7e9)
    write_snapshot(tmp_path, SNAPSHOT, first)
    second = new_capture_id(tmp_path, 1.7e9)
    write_snapshot(tmp_path, SNAPSHOT, second)
    for n in range(2, 11):
        write_snapshot(tmp_path, SNAPSHOT, new_capture_id(tmp_path, 1.7e9))
    assert second == first + "_1"
    assert [f.capture_id for f in list_snapshots(tmp_path)] == [first] + [f"{first}_{n}" for n in range(1, 11)]


def test_bad_files_raise_value_errors_naming_the_file(tmp_path: Path) -> None:
    not_gzip = tmp_path / "x.snapshot.json.gz"
    not_gzip.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="x.snapshot.json.gz"):
        read_snapshot(not_gzip)
    wrong = tmp_path / "y.snapshot.json.gz"
    with gzip.open(wrong, "wt") as handle:
        json.dump({"device": "cpu"}, handle)
    with pytest.raises(ValueError, match="y.snapshot.json.gz.*not a memory snapshot"):
        read_snapshot(wrong)
    with pytest.raises(ValueError, match="reason"):
        write_snapshot(tmp_path, MemorySnapshot("cpu", "bored", 0, 0.0, SNAPSHOT.allocator, ()))
    with pytest.raises(ValueError, match="capture id"):
        write_snapshot(tmp_path, SNAPSHOT, "../escape")


def test_the_header_is_read_without_the_blocks(tmp_path: Path) -> None:
    many = MemorySnapshot(device="cpu", reason="leak", step=41, wall_time=1.75e9, allocator=SNAPSHOT.allocator,
                          blocks=tuple(MemoryBlock(4, (1,), "float32", "Add", "", s, ("a.py:1 f",), "activation")
                                       for s in range(20_000)))
    path = write_snapshot(tmp_path, many, "2026_01_02_03_04_05")
    assert read_snapshot_header(path) == SnapshotHeader("cpu", "leak", 41, 1.75e9, 1000, 1200)
    foreign = tmp_path / "z.snapshot.json.gz"  # valid JSON, other key order: no header, the list shows the id only
    with gzip.open(foreign, "wt") as handle:
        json.dump({"blocks": [], **SNAPSHOT.to_dict()}, handle)
    assert read_snapshot_header(foreign) is None
    broken = tmp_path / "b.snapshot.json.gz"
    broken.write_bytes(b"not gzip")
    assert read_snapshot_header(broken) is None
