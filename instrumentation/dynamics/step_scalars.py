"""StepScalars: collects one step's scalars and hands them to the writer in one call when the step ends."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


class StepScalars:
    """``add(tag, value, step)`` appends; ``flush()`` writes what was added with one ``add_scalar_rows`` row (one
    queue item for the step; the same points as ``add_scalar`` per tag, in order, a tag added twice included) — or,
    for a writer without it, with ``add_scalar`` per value. A new step flushes the last."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self._add_rows = getattr(writer, "add_scalar_rows", None)
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
        if self._add_rows is not None:
            self._add_rows(tuple(tags), (values,), (step,))
            return
        add_scalar = self.writer.add_scalar
        for tag, value in zip(tags, values):
            add_scalar(tag, value, step)


class ScalarSeries:
    """One tag's values at successive steps (the loss), each with the wall time it was taken at, handed to the
    writer in batches: one ``add_scalar_rows`` item of one tag per ``write`` (framed at once on the writer thread),
    or ``add_scalar`` per value (at the writer's own wall time) for a writer without it."""

    def __init__(self, writer: Any, tag: str) -> None:
        self.writer, self.tags = writer, (tag,)
        self._add_rows = getattr(writer, "add_scalar_rows", None)

    def write(self, values: Sequence[float], steps: Sequence[int], walls: Sequence[float]) -> None:
        if self._add_rows is not None:
            self._add_rows(self.tags, np.array(values, dtype=np.float64)[:, None], steps, walls)
            return
        for value, step in zip(values, steps):  # NOTE: a writer without add_scalar_rows may take no wall time
            self.writer.add_scalar(self.tags[0], value, step)
