"""Discovery and incremental tailing: new runs and files, growing and half-written files, deletions, corruption."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from board.data.discovery import discover_runs, run_group
from board.data.store import LogdirStore, UnknownSeries
from board_helpers import scalar_record, version_record, write_scalars

EVENTS = "events.out.tfevents.1700000000.host.1.0"


def append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as file:
        file.write(data)


def test_discovery_names_nested_runs_and_groups_ranks(tmp_path: Path) -> None:
    for run in ("a", "exp/one", "exp/two/rank0", "exp/two/rank1"):
        append(tmp_path / run / EVENTS, version_record())
    append(tmp_path / EVENTS, version_record())
    (tmp_path / "empty" / "plugins").mkdir(parents=True)
    (tmp_path / "exp" / "notes.txt").write_text("not an event file")
    runs = discover_runs(tmp_path)
    assert sorted(runs) == [".", "a", "exp/one", "exp/two/rank0", "exp/two/rank1"]
    assert run_group("exp/two/rank1") == "exp/two" and run_group("exp/one") == "exp/one"
    assert run_group("rank3") == "."


def test_links_leading_outside_the_logdir_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    append(outside / "secret" / EVENTS, version_record())
    logdir = tmp_path / "logs"
    append(logdir / "inside" / EVENTS, version_record())
    (logdir / "escape").symlink_to(outside / "secret", target_is_directory=True)
    assert sorted(discover_runs(logdir)) == ["inside"]


def test_growing_file_half_written_record_and_new_file(tmp_path: Path) -> None:
    path = tmp_path / "run" / EVENTS
    append(path, version_record() + b"".join(scalar_record("loss", s, s * 1.0) for s in range(3)))
    store = LogdirStore(tmp_path)
    store.refresh()
    assert store.scalars("run", "loss")[0].steps.tolist() == [0, 1, 2]
    record = scalar_record("loss", 3, 3.0)
    append(path, record[:7])  # the writer is mid-record
    store.refresh()
    assert store.scalars("run", "loss")[0].steps.tolist() == [0, 1, 2]
    append(path, record[7:] + scalar_record("loss", 4, 4.0))
    store.refresh()
    assert store.scalars("run", "loss")[0].steps.tolist() == [0, 1, 2, 3, 4]
    append(path.with_name(EVENTS.replace(".0", ".1")), version_record() + scalar_record("acc", 9, 0.5))
    store.refresh()
    assert store.scalar_tags("run") == ["acc", "loss"]
    assert store.runs()[0].files == 2 and store.runs()[0].corrupt_records == 0


def test_restarted_run_follows_the_newest_timeline(tmp_path: Path) -> None:
    first = tmp_path / "run" / EVENTS
    append(first, version_record() + b"".join(scalar_record("loss", s, 1.0) for s in range(0, 100, 10)))
    second = tmp_path / "run" / EVENTS.replace("1700000000", "1700000500")
    append(second, version_record() + b"".join(scalar_record("loss", s, 2.0) for s in range(50, 80, 10)))
    store = LogdirStore(tmp_path)
    store.refresh()
    columns, revision = store.scalars("run", "loss")
    assert columns.steps.tolist() == [0, 10, 20, 30, 40, 50, 60, 70]
    assert columns.values.tolist() == [1.0] * 5 + [2.0] * 3
    assert revision == 1 and store.runs()[0].superseded_points == 5


def test_deleted_run_disappears_and_replaced_file_is_reread(tmp_path: Path) -> None:
    append(tmp_path / "gone" / EVENTS, version_record() + scalar_record("x", 1, 1.0))
    path = tmp_path / "kept" / EVENTS
    append(path, version_record() + scalar_record("x", 1, 1.0) + scalar_record("x", 2, 2.0))
    store = LogdirStore(tmp_path)
    store.refresh()
    shutil.rmtree(tmp_path / "gone")
    path.unlink()
    append(path, version_record() + scalar_record("x", 7, 7.0))  # same name, new (shorter) content
    store.refresh()
    assert [r.name for r in store.runs()] == ["kept"]
    assert store.scalars("kept", "x")[0].steps.tolist() == [7]
    with pytest.raises(UnknownSeries):
        store.scalars("gone", "x")


def test_corrupt_record_is_a_warning_of_its_run_only(tmp_path: Path) -> None:
    good = version_record() + b"".join(scalar_record("x", s, float(s)) for s in range(5))
    append(tmp_path / "healthy" / EVENTS, good)
    damaged = bytearray(version_record() + b"".join(scalar_record("x", s, float(s)) for s in range(5)))
    damaged[len(version_record()) + 20] ^= 0xFF  # flip a byte inside the first scalar record's payload
    append(tmp_path / "damaged" / EVENTS, bytes(damaged))
    store = LogdirStore(tmp_path)
    store.refresh()
    summaries = {s.name: s for s in store.runs()}
    assert summaries["healthy"].corrupt_records == 0
    assert summaries["damaged"].corrupt_records >= 1
    assert store.scalars("healthy", "x")[0].steps.tolist() == [0, 1, 2, 3, 4]
    assert store.scalars("damaged", "x")[0].steps.tolist() == [1, 2, 3, 4]


def test_missing_logdir_is_waited_for(tmp_path: Path) -> None:
    store = LogdirStore(tmp_path / "later")
    store.refresh()
    assert store.runs() == [] and not store.logdir_exists
    write_scalars(tmp_path / "later" / "run", "loss", np.arange(3), np.ones(3))
    store.refresh()
    assert store.scalars("run", "loss")[0].steps.tolist() == [0, 1, 2]
