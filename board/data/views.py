"""What a chart shows of one series: a window, smoothed on the full series, downsampled for display."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from board.data.downsample import DEFAULT_POINTS, envelope_indices
from board.data.measured import sampling_note, unmeasured_before
from board.data.series import ScalarColumns
from board.data.smoothing import EmaState, ema
from board.data.store import LogdirStore

XAxis = Literal["step", "relative", "wall"]
X_AXES: tuple[XAxis, ...] = ("step", "relative", "wall")


@dataclass(frozen=True, slots=True)
class ScalarView:
    """Display-ready points of one run's tag. `x` is in steps, seconds since the run's first point, or epoch
    seconds; non-finite values are listed apart (`nonfinite_x`, `nonfinite_values`) so they can be marked."""

    run: str
    tag: str
    x: np.ndarray
    raw: np.ndarray
    smoothed: np.ndarray | None
    nonfinite_x: np.ndarray
    nonfinite_values: np.ndarray
    window_points: int  # points of the series inside the window, before downsampling
    revision: int
    length: int  # points in the whole series (clients append after this many)
    origin_wall_time: float  # wall time of the series' first point, the zero of the relative axis
    unmeasured_before: np.ndarray  # per point of `x`: some step between it and the point before was not measured
    sampling: str | None  # None when every step from the series' first to its last was measured, else in words


class SmoothingCache:
    """Smoothed curves by (run, tag, weight); extended incrementally while a series only grows."""

    def __init__(self, max_entries: int = 64) -> None:
        self._entries: OrderedDict[tuple[str, str, float], tuple[int, int, np.ndarray, EmaState | None]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def smoothed(self, run: str, tag: str, columns: ScalarColumns, revision: int, weight: float) -> np.ndarray:
        key = (run, tag, weight)
        with self._lock:
            entry = self._entries.get(key)
        n = len(columns)
        if entry is not None and entry[0] == revision and entry[1] <= n:
            _, done, curve, state = entry
            if done < n:
                tail, state = ema(columns.steps[done:], columns.values[done:], weight, state)
                curve = np.concatenate([curve, tail])
        else:
            curve, state = ema(columns.steps, columns.values, weight)
        with self._lock:
            self._entries[key] = (revision, n, curve, state)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return curve


def x_values(columns: ScalarColumns, x_axis: XAxis) -> np.ndarray:
    if x_axis == "step":
        return columns.steps
    if x_axis == "relative":
        return columns.wall_times - (columns.wall_times[0] if len(columns) else 0.0)
    return columns.wall_times


def scalar_view(
    store: LogdirStore,
    cache: SmoothingCache,
    run: str,
    tag: str,
    *,
    x_axis: XAxis = "step",
    window: Sequence[float] | None = None,
    smoothing: float = 0.0,
    max_points: int = DEFAULT_POINTS,
    after: int = 0,
) -> ScalarView:
    """The points of `run`/`tag` inside `window` (x units; None = all) and after index `after`, downsampled
    to about `max_points` with the envelope kept; every point when the window holds fewer."""
    columns, revision = store.scalars(run, tag)
    smoothed_all = cache.smoothed(run, tag, columns, revision, smoothing) if smoothing > 0 else None
    x_all = x_values(columns, x_axis)
    lo, hi = _window_bounds(x_all, window, x_axis)
    if window is not None:  # one neighbour on each side, so that lines run to the window's edges
        lo, hi = max(lo - 1, 0), min(hi + 1, len(x_all))
    lo = max(lo, after)
    values = columns.values[lo:hi]
    x = x_all[lo:hi]
    # NOTE: one sum tells that every value is finite (the common case) at a fraction of a mask's cost.
    finite = None if np.isfinite(values.sum()) else np.isfinite(values)
    finite_index = None if finite is None or finite.all() else np.flatnonzero(finite)
    if finite_index is None:
        picked = envelope_indices(columns.steps[lo:hi], values, max_points)
    else:
        sub = envelope_indices(columns.steps[lo:hi][finite_index], values[finite_index], max_points)
        picked = finite_index[sub]
    nonfinite = np.flatnonzero(~finite) if finite is not None and finite_index is not None else np.empty(0, np.int64)
    return ScalarView(
        run=run,
        tag=tag,
        x=x[picked],
        raw=values[picked],
        smoothed=smoothed_all[lo:hi][picked] if smoothed_all is not None else None,
        nonfinite_x=x[nonfinite],
        nonfinite_values=values[nonfinite],
        window_points=hi - lo,
        revision=revision,
        length=len(columns),
        origin_wall_time=float(columns.wall_times[0]) if len(columns) else 0.0,
        unmeasured_before=unmeasured_before(columns.steps, lo + picked),
        sampling=sampling_note(columns.steps),
    )


def _window_bounds(x: np.ndarray, window: Sequence[float] | None, x_axis: XAxis) -> tuple[int, int]:
    """Index range [lo, hi) of the points whose x lies in the window (steps are sorted; times nearly so)."""
    if window is None or len(x) == 0:
        return 0, len(x)
    x_lo, x_hi = min(window), max(window)
    if x_axis == "step":
        return int(np.searchsorted(x, x_lo, side="left")), int(np.searchsorted(x, x_hi, side="right"))
    inside = np.flatnonzero((x >= x_lo) & (x <= x_hi))
    return (int(inside[0]), int(inside[-1]) + 1) if len(inside) else (0, 0)
