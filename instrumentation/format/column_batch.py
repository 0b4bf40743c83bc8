"""ScalarBatch: what `EventFileReader.read_columns()` returns — every scalar point as numpy columns."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from instrumentation.format.decode import Columns, RecordDecoder
from instrumentation.format.values import Event, ScalarValue


@dataclass(frozen=True, slots=True)
class ScalarBatch:
    """The records of one read: every `ScalarValue` they hold as columns (in file order), everything else as Events.

    `events` are the records that are not plain scalar events, in file order, with their scalar values moved to
    the columns (an Event left with no values is kept only if it carries `file_version` or `session_status`).
    `records` counts the records consumed (0: nothing complete was appended).
    """

    tags: list[str]
    steps: np.ndarray = field(repr=False)  # int64
    wall_times: np.ndarray = field(repr=False)  # float64, seconds since the epoch
    values: np.ndarray = field(repr=False)  # float64 (float32 on disk for simple_value); NaN/±Inf kept
    events: list[Event]
    records: int

    def __len__(self) -> int:
        return len(self.tags)


class ScalarBatchBuilder:
    """Collects what a `RecordDecoder` hands over into one `ScalarBatch`."""

    def __init__(self) -> None:
        self.tags: list[str] = []
        self._steps: list[int] = []
        self._wall_times: list[float] = []
        self._values: list[float] = []
        self.events: list[Event] = []
        self.records = 0

    def add(self, decoder: RecordDecoder, records: list[bytes]) -> None:
        self.records += len(records)
        decoder.decode_into(records, self._columnar, self._single)

    def _columnar(self, columns: Columns) -> None:
        tags, steps, wall_times, values, _ = columns
        self.tags += tags
        self._steps += steps
        self._wall_times += wall_times
        self._values += values

    def _single(self, event: Event) -> None:
        scalars = [value for value in event.values if value.__class__ is ScalarValue]
        if not scalars:
            if event.values or event.file_version is not None or event.session_status is not None:
                self.events.append(event)
            return
        for scalar in scalars:
            self.tags.append(scalar.tag)
            self._steps.append(scalar.step)
            self._wall_times.append(scalar.wall_time)
            self._values.append(scalar.value)
        rest = tuple(value for value in event.values if value.__class__ is not ScalarValue)
        if rest or event.file_version is not None or event.session_status is not None:
            self.events.append(Event(event.step, event.wall_time, rest, event.file_version, event.session_status))

    def build(self) -> ScalarBatch:
        return ScalarBatch(self.tags, np.array(self._steps, np.int64), np.array(self._wall_times, np.float64),
                           np.array(self._values, np.float64), self.events, self.records)
