"""Shared fixtures: event files written by TensorBoard's own (TF-free) writer."""
from __future__ import annotations

import pytest

from event_helpers import event_files


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
