"""ScalarBatch: what `EventFileReader.read_columns()` returns — every scalar point as numpy columns."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from instrumentation.format.decode import RecordDecoder
from instrumentation.format.plain_scalars import TaggedColumns
from instrumentation.format.values import Event, ScalarValue


@dataclass(frozen=True, slots=True)
class ScalarBatch:
    """The records of one read: every `ScalarValue` they hold as columns (in file order), everything else as Events.

    `events` are the records that are not plain scalar events, in file order, with their scalar values moved to
    the columns (an Event left with no values is kept only if it carries `file_version` or `session_status`).
    `records` counts the records consumed (0: nothing complete was appended).
    """

    tag_names: list[str]  # the distinct tags of the batch
    tag_codes: np.ndarray = field(repr=False)  # int32: point i has tag `tag_names[tag_codes[i]]`
    steps: np.ndarray = field(repr=False)  # int64
    wall_times: np.ndarray = field(repr=False)  # float64, seconds since the epoch
    values: np.ndarray = field(repr=False)  # float64 (float32 on disk for simple_value); NaN/±Inf kept
    events: list[Event]
    records: int

    def __len__(self) -> int:
        return len(self.tag_codes)

    @property
    def tags(self) -> list[str]:
        """The tag of every point (a list of str built on demand: use `tag_names`/`tag_codes` where speed counts)."""
        names = self.tag_names
        return [names[code] for code in self.tag_codes.tolist()]


class ScalarBatchBuilder:
    """Collects what a `RecordDecoder` hands over into one `ScalarBatch`."""

    def __init__(self) -> None:
        self._codes_by_tag: dict[str, int] = {}
        self._columns: list[TaggedColumns] = []
        self._tags: list[str] = []  # points of single events, in order, appended as one more column batch
        self._steps: list[int] = []
        self._wall_times: list[float] = []
        self._values: list[float] = []
        self.events: list[Event] = []
        self.records = 0

    def add(self, decoder: RecordDecoder, records: Sequence[bytes],
            located: tuple[bytes, np.ndarray, np.ndarray] | None = None) -> None:
        self.records += len(records)
        decoder.decode_into(records, self._columnar, self._single, located)

    def _columnar(self, columns: TaggedColumns) -> None:
        self._flush_singles()
        self._columns.append(columns)

    def _flush_singles(self) -> None:
        if self._tags:
            self._columns.append(TaggedColumns.from_lists(self._tags, self._steps, self._wall_times, self._values))
            self._tags, self._steps, self._wall_times, self._values = [], [], [], []

    def _single(self, event: Event) -> None:
        scalars = [value for value in event.values if value.__class__ is ScalarValue]
        if not scalars:
            if event.values or event.file_version is not None or event.session_status is not None:
                self.events.append(event)
            return
        for scalar in scalars:
            self._tags.append(scalar.tag)
            self._steps.append(scalar.step)
            self._wall_times.append(scalar.wall_time)
            self._values.append(scalar.value)
        rest = tuple(value for value in event.values if value.__class__ is not ScalarValue)
        if rest or event.file_version is not None or event.session_status is not None:
            self.events.append(Event(event.step, event.wall_time, rest, event.file_version, event.session_status))

    def build(self) -> ScalarBatch:
        """One batch: every column batch's codes renumbered into one list of names (per batch, not per point)."""
        self._flush_singles()
        names = self._codes_by_tag
        codes = []
        renumbers: dict[int, np.ndarray] = {}  # by the names list: the runs of one decoded chunk share theirs
        for columns in self._columns:
            renumber = renumbers.get(id(columns.names))
            if renumber is None:
                renumber = renumbers[id(columns.names)] = np.fromiter(
                    (names.setdefault(name, len(names)) for name in columns.names), np.int32, len(columns.names))
            codes.append(renumber[columns.codes] if len(columns.codes) else columns.codes.astype(np.int32))
        parts = self._columns
        return ScalarBatch(list(names), _joined(codes, np.int32), _joined([c.steps for c in parts], np.int64),
                           _joined([c.wall_times for c in parts], np.float64),
                           _joined([c.values for c in parts], np.float64), self.events, self.records)


def _joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(0, dtype)
