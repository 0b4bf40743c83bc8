"""StepScalars: collects one step's scalars and hands them to the writer in one call when the step ends."""
from __future__ import annotations

import time
from typing import Any, Sequence


class StepScalars:
    """``add(tag, value, step)`` appends; ``flush()`` writes what was added with one ``add_scalar_dict`` (one queue
    item for the step; the same events as ``add_scalar`` per tag, in order) — or, for a writer without it or a
    step that repeats a tag (a layer called twice), with ``add_scalar`` per value. A new step flushes the last."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self._add_many = getattr(writer, "add_scalar_dict", None)
        self.tags: list[str] = []
        self.values: list[float] = []
        self.step: int | None = None

    def add(self, tag: str, value: float, step: int) -> None:
        self.extend((tag,), (value,), step)

    def extend(self, tags: Sequence[str], values: Sequence[float], step: int) -> None:
        """``add`` for aligned tags and values of one step."""
        if step != self.step:
            if self.tags:
                self.flush()
            self.step = step
        self.tags.extend(tags)
        self.values.extend(values)

    def flush(self) -> None:
        tags, values, step = self.tags, self.values, self.step
        if not tags:
            return
        self.tags, self.values = [], []
        by_tag = dict(zip(tags, values)) if self._add_many is not None else {}
        if len(by_tag) == len(tags):
            self._add_many(by_tag, step)
            return
        add_scalar = self.writer.add_scalar
        for tag, value in zip(tags, values):
            add_scalar(tag, value, step)


class ScalarSeries:
    """One tag's values at successive steps (the loss), handed to the writer as one ``add_scalar_rows`` item (bulk
    encoded on the writer thread) every ``batch`` values and on ``flush()``; ``add_scalar`` per value for a writer
    without it. Each value keeps the wall time it was added at."""

    def __init__(self, writer: Any, tag: str, batch: int = 64) -> None:
        self.writer, self.tags, self.batch = writer, (tag,), batch
        self._add_rows = getattr(writer, "add_scalar_rows", None)
        self.values: list[float] = []
        self.steps: list[int] = []
        self.walls: list[float] = []

    def add(self, value: float, step: int) -> None:
        if self._add_rows is None:
            self.writer.add_scalar(self.tags[0], value, step)
            return
        self.values.append(value)
        self.steps.append(step)
        self.walls.append(_wall())
        if len(self.steps) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self.steps:
            values, steps, walls, self.values, self.steps, self.walls = self.values, self.steps, self.walls, [], [], []
            self._add_rows(self.tags, [[value] for value in values], steps, walls)

    def extend(self, values: list[float], steps: list[int], walls: list[float]) -> None:
        """``add`` for several values, each with the wall time it was taken at."""
        if self._add_rows is None:
            for value, step in zip(values, steps):
                self.writer.add_scalar(self.tags[0], value, step)
            return
        self.values += values
        self.steps += steps
        self.walls += walls
        if len(self.steps) >= self.batch:
            self.flush()


_wall = time.time
