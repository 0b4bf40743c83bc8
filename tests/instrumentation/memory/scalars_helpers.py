"""Read back the scalars a test run wrote (our reader; the writer is flushed first)."""
from __future__ import annotations

import glob
import os

from instrumentation.format import EventFileReader, ScalarValue


def read_scalars(run_dir: str) -> dict[str, dict[int, float]]:
    """tag → {step: value} for every scalar in the run's event files."""
    found: dict[str, dict[int, float]] = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for event in EventFileReader(path).read():
            for value in event.values:
                if isinstance(value, ScalarValue):
                    found.setdefault(value.tag, {})[value.step] = value.value
    return found
