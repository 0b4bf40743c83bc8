"""One run whose reading raises never stops the others: it is listed with its reason, logged once, retried only when
its files change, and a decoding worker that fails on it still caches the other runs of its group."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import board.data.run as run_module
import board.data.store as store_module
from board.data import worker
from board.data.store import LogdirStore
from board_helpers import scalar_record, write_scalars

RUNS = ("a", "b", "c")  # "a" sorts first: the old pass stopped there and never loaded b and c


class _Poison:
    """Makes decoding one run's files raise what a decoding bug raises (an OverflowError from a length header
    that the old reader trusted), however the reader itself is fixed; counts the attempts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, run: str) -> None:
        self.attempts = 0
        original = run_module.EventFileReader.read_columns
        poison = self

        def read_columns(reader, *args, **kwargs):
            if Path(reader.path).parent.name == run:
                poison.attempts += 1
                raise OverflowError("cannot fit 'int' into an index-sized integer")
            return original(reader, *args, **kwargs)

        monkeypatch.setattr(run_module.EventFileReader, "read_columns", read_columns)


def _logdir(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    for index, run in enumerate(RUNS):
        write_scalars(logdir / run, "loss", np.arange(20), np.full(20, float(index)))
    return logdir


def test_a_run_that_raises_is_listed_with_its_reason_and_the_others_load(tmp_path: Path, monkeypatch,
                                                                         caplog) -> None:
    logdir = _logdir(tmp_path)
    poison = _Poison(monkeypatch, "a")
    store = LogdirStore(logdir)
    with caplog.at_level(logging.WARNING, logger=store_module.__name__):
        for _ in range(3):
            store.refresh()
    summaries = {summary.name: summary for summary in store.runs()}
    assert sorted(summaries) == list(RUNS)
    assert summaries["a"].warnings == ("reading stopped: OverflowError: cannot fit 'int' into an index-sized integer",)
    for index, run in enumerate(("b", "c"), start=1):
        assert summaries[run].warnings == ()
        assert store.scalars(run, "loss")[0].values.tolist() == [float(index)] * 20
    assert poison.attempts == 1  # not again while its files stay as they were
    reported = [r.getMessage() for r in caplog.records if "OverflowError" in r.getMessage()]
    assert reported == ["run a: reading stopped: OverflowError: cannot fit 'int' into an index-sized integer"]
    assert store.refreshes == 3


def test_a_failed_run_is_read_again_once_its_files_change(tmp_path: Path, monkeypatch) -> None:
    logdir = _logdir(tmp_path)
    poison = _Poison(monkeypatch, "a")
    store = LogdirStore(logdir)
    store.refresh()
    store.refresh()
    assert poison.attempts == 1
    monkeypatch.undo()  # the bug is gone, and the file grows: the run is read, the warning goes
    [events] = (logdir / "a").glob("events.out.tfevents.*")
    with open(events, "ab") as file:
        file.write(scalar_record("loss", 20, 7.0))
    store.refresh()
    summary = {s.name: s for s in store.runs()}["a"]
    assert summary.warnings == ()
    assert store.scalars("a", "loss")[0].values.tolist() == [0.0] * 20 + [7.0]


def test_a_worker_failing_on_one_run_caches_the_others_and_is_not_started_again_for_it(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    logdir, cache_root = _logdir(tmp_path), tmp_path / "cache"
    _Poison(monkeypatch, "a")
    assert worker.load_into_cache(logdir, cache_root, list(RUNS)) == ["a"]
    assert len(list(cache_root.glob("*/*/manifest.json"))) == 2  # b and c, though a came first in the group

    started: list[list[str]] = []
    monkeypatch.setattr(store_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(LogdirStore, "_decode_in_workers",
                        lambda self, runs, decoded: started.append([r.name for r in runs]))
    store = LogdirStore(logdir, cache_root=cache_root, workers=2)
    store.refresh()
    store.refresh()
    assert started == [["a", "b", "c"], []]  # the failed run is listed, so no worker is started for it again
    assert {s.name: bool(s.warnings) for s in store.runs()} == {"a": True, "b": False, "c": False}
