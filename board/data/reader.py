"""The one place the board touches the project's event-file reader (`instrumentation.format`)."""
from __future__ import annotations

from instrumentation.format import EventFileReader, ScalarBatch, is_event_file

__all__ = ["EventFileReader", "ScalarBatch", "is_event_file"]
