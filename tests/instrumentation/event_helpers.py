"""Helpers for tests that read event files back: list a run's event files, read one run, pick values by tag."""
from __future__ import annotations

import glob
import os
from collections.abc import Iterable

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
