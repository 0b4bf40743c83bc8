"""What the Dynamics page shows of a run: update ratios as a layers × steps matrix, and per-layer series."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.store import LogdirStore, UnknownSeries
from board.data.views import ScalarView, SmoothingCache, scalar_view
from instrumentation.format.tags import ACTIVATION, DEAD_FRACTION, GRAD_NORM, UPDATE_RATIO

DEAD_FRACTION_SUFFIX = "/" + DEAD_FRACTION  # act/<layer>/dead_fraction
HEALTHY_UPDATE_RATIO = (1e-3, 1e-2)  # LOGFORMAT.md: healthy ‖Δw‖/‖w‖
MAX_COLUMNS = 400  # heatmap columns; longer runs are binned


@dataclass(frozen=True, slots=True)
class RatioMatrix:
    """log10 of the update ratio, one row per parameter, one column per step (or per bin of steps).

    A binned column holds the value of its steps farthest from the healthy band (in log10), so neither an
    explosion nor a vanishing stretch is averaged away. Missing points are NaN."""

    names: tuple[str, ...]
    steps: np.ndarray  # first step of each column
    log10_ratios: np.ndarray  # shape (len(names), len(steps))
    steps_per_column: int


def dynamics_runs(store: LogdirStore) -> list[str]:
    """Runs holding any tag the Dynamics page draws."""
    return [run for run, tags in store.all_scalar_tags().items()
            if any(tag.startswith((UPDATE_RATIO, GRAD_NORM)) or tag.endswith(DEAD_FRACTION_SUFFIX) for tag in tags)]


def tags_with_prefix(store: LogdirStore, run: str, prefix: str, suffix: str = "") -> dict[str, str]:
    """Name (the tag without prefix and suffix) → tag, in tag order."""
    try:
        tags = store.scalar_tags(run)
    except UnknownSeries:
        return {}
    return {tag[len(prefix):len(tag) - len(suffix)]: tag for tag in tags
            if tag.startswith(prefix) and tag.endswith(suffix) and len(tag) > len(prefix) + len(suffix)}


def ratio_matrix(store: LogdirStore, run: str, max_columns: int = MAX_COLUMNS) -> RatioMatrix:
    tags = tags_with_prefix(store, run, UPDATE_RATIO)
    columns = {name: store.scalars(run, tag)[0] for name, tag in tags.items()}
    all_steps = np.unique(np.concatenate([c.steps for c in columns.values()])) if columns else np.empty(0, np.int64)
    width = max(1, -(-len(all_steps) // max_columns))  # ceil division
    starts = all_steps[::width]
    matrix = np.full((len(columns), len(starts)), np.nan)
    center = float(np.mean(np.log10(HEALTHY_UPDATE_RATIO)))
    for row, series in enumerate(columns.values()):
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log10(series.values)
        column = np.searchsorted(all_steps, series.steps) // width
        distance = np.where(np.isfinite(logs), np.abs(logs - center), np.where(np.isnan(logs), -1.0, np.inf))
        order = np.lexsort((distance, column))  # per column, the farthest from the band last
        last = np.r_[column[order][1:] != column[order][:-1], True]
        matrix[row, column[order][last]] = logs[order][last]
    return RatioMatrix(tuple(columns), starts, matrix, width)


def layer_views(store: LogdirStore, cache: SmoothingCache, run: str, prefix: str, suffix: str = "") -> list[ScalarView]:
    """One display-ready (downsampled, envelope-kept) series per tag ``<prefix><name><suffix>`` of the run."""
    return [scalar_view(store, cache, run, tag) for tag in tags_with_prefix(store, run, prefix, suffix).values()]
