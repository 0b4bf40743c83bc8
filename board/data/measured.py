"""Which steps of a series were measured: the gaps a chart must not draw a line across, and the sampling in words."""
from __future__ import annotations

import numpy as np

MAX_LISTED = 4  # a series this short with no interval has its steps listed


def unmeasured_before(steps: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """For each point `indices[i]` of a series with increasing `steps`: whether some step between it and the point
    before it (`indices[i - 1]`; for the first, the series' point just before it) was not measured. Points picked
    out of a series measured at every step (a downsampled view) have no gap between them."""
    indices = np.asarray(indices, np.int64)
    if not len(indices):
        return np.zeros(0, bool)
    previous = np.concatenate([[indices[0] - 1], indices[:-1]])
    has_previous = previous >= 0
    previous = np.maximum(previous, 0)
    return has_previous & (np.asarray(steps)[indices] - np.asarray(steps)[previous] > indices - previous)


def is_thinned(steps: np.ndarray) -> bool:
    """True when some step between the series' first and last point was not measured."""
    return len(steps) > 1 and int(steps[-1] - steps[0]) > len(steps) - 1


def sampling_note(steps: np.ndarray) -> str | None:
    """None for a series measured at every step from its first to its last; else its latest sampling interval,
    "every 16 steps from step 32" (", last at step 171" when one later point is off that interval, " to step 99, then
    at steps 120, 171" or "..., then 9 points to step 400" for more); when no three
    points in a row are equally spaced, its steps ("at steps 45, 90") or, past MAX_LISTED, how many points."""
    steps = np.asarray(steps, np.int64)
    if not is_thinned(steps):
        return None
    spacing = np.diff(steps)
    regular = np.flatnonzero(spacing[1:] == spacing[:-1])  # points j, j+1, j+2 equally spaced
    if not len(regular):
        listed = ", ".join(str(step) for step in steps[:MAX_LISTED].tolist())
        return f"at steps {listed}" if len(steps) <= MAX_LISTED else f"{len(steps)} points at irregular steps"
    last = int(regular[-1])
    every = int(spacing[last])
    off = np.flatnonzero(spacing[:last + 1] != every)
    begin = int(off[-1]) + 1 if len(off) else 0
    end = last + 2  # the stretch's last point
    note = f"{'every step' if every == 1 else f'every {every} steps'} from step {int(steps[begin])}"
    after = steps[end + 1:]
    if len(after) == 1:
        return note + f", last at step {int(after[0])}"
    if len(after) > 1:  # the regular stretch ended: say where, and what came after it
        later = (f"at steps {', '.join(str(step) for step in after.tolist())}" if len(after) <= MAX_LISTED
                 else f"{len(after)} points to step {int(after[-1])}")
        return note + f" to step {int(steps[end])}, then {later}"
    return note
