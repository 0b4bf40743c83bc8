"""Shared helpers: event files written by TensorBoard's own (TF-free) writer, and reading whole runs."""
from __future__ import annotations

import glob
import os
from collections.abc import Iterable

import pytest

from instrumentation.format import Event, EventFileReader


def event_files(run_dir: str | os.PathLike[str]) -> list[str]:
    return sorted(glob.glob(os.path.join(os.fspath(run_dir), "events.out.tfevents.*")))


def read_run(run_dir: str | os.PathLike[str]) -> list[Event]:
    """Every event of the run's single event file (asserting there is exactly one and nothing is corrupt)."""
    files = event_files(run_dir)
    assert len(files) == 1, files
    reader = EventFileReader(files[0])
    events = reader.read()
    assert reader.corrupt_records == 0
    return events


def values_of(events: Iterable[Event], tag: str) -> list:
    return [value for event in events for value in event.values if value.tag == tag]


@pytest.fixture
def tensorboard_writer(tmp_path):
    """Writes tensorboard.compat Event protos with TensorBoard's EventFileWriter; yields (write(event), path())."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "tb"))

    def path() -> str:
        writer.flush()
        return event_files(tmp_path / "tb")[0]

    yield writer.add_event, path
    writer.close()
