"""One run's events waiting for the writer thread's next write, in queue order, framed when they are written."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from instrumentation.format.records import frame_records
from instrumentation.summary.record_blocks import BLOCK_MIN_RECORDS, BlockFramer
from instrumentation.summary.scalar_records import ScalarLayout, layout_runs, scalar_row

_FRAMERS: dict[ScalarLayout, BlockFramer] = {}
_FRAMERS_MAX = 1024


def _framer(layout: ScalarLayout) -> BlockFramer:
    framer = _FRAMERS.get(layout)
    if framer is None:
        if len(_FRAMERS) >= _FRAMERS_MAX:
            _FRAMERS.clear()
        framer = _FRAMERS[layout] = BlockFramer(layout.template, layout.variable_offsets)
    return framer


class RunBatch:
    """Events (serialized, unframed) appended to ``bodies`` one by one, and blocks of scalar Events framed at once
    (``add_rows`` of ``BLOCK_MIN_RECORDS`` steps or more); ``framed()`` gives them all framed, in the order added."""

    __slots__ = ("parts", "bodies", "events")

    def __init__(self) -> None:
        self.parts: list[bytes] = []  # framed records of what came before ``bodies``
        self.bodies: list[bytes] = []
        self.events = 0  # events in ``parts``

    def __len__(self) -> int:
        """Events waiting."""
        return self.events + len(self.bodies)

    def add_rows(self, tags: tuple[str, ...], rows: Sequence[Sequence[float]] | np.ndarray, steps: list[int],
                 walls: list[float]) -> None:
        """One scalar Event per row (``len(tags)`` float values), at its step and wall time."""
        if len(steps) >= BLOCK_MIN_RECORDS:
            self._add_block(tags, rows, steps, walls)
            return
        if rows.__class__ is np.ndarray:
            rows = rows.tolist()  # type: ignore[union-attr]
        append = self.bodies.append
        for row, step, wall_time in zip(rows, steps, walls):
            append(scalar_row(tags, row, step, wall_time))

    def _add_block(self, tags: tuple[str, ...], rows: Sequence[Sequence[float]] | np.ndarray, steps: list[int],
                   walls: list[float]) -> None:
        values = np.asarray(rows, dtype="<f8").reshape(len(steps), len(tags))
        step_array = np.asarray(steps, dtype=np.int64)
        wall_array = np.asarray(walls, dtype="<f8")
        self._frame_bodies()  # NOTE: first: the file keeps the order events were added in
        for layout, start, stop in layout_runs(tags, step_array, wall_array):
            variable = layout.variable_bytes(values[start:stop], step_array[start:stop],
                                             wall_array[start:stop] if layout.has_wall else None)
            self.parts.append(_framer(layout).frame(variable))
        self.events += len(steps)

    def _frame_bodies(self) -> None:
        if self.bodies:
            self.parts.append(frame_records(self.bodies))
            self.events += len(self.bodies)
            self.bodies = []

    def framed(self) -> tuple[bytes, int]:
        """Everything waiting as framed bytes, and the number of events in them."""
        self._frame_bodies()
        return b"".join(self.parts), self.events
