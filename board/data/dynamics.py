"""What the Dynamics page shows of a run: update ratios as a layers × steps matrix, per-layer series, which steps were
measured (watch() samples one step in k) and the run's loss."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.store import LogdirStore, UnknownSeries
from board.data.views import ScalarView, SmoothingCache, scalar_view
from instrumentation.format.tags import ACTIVATION, DEAD_FRACTION, GRAD_NORM, UPDATE_RATIO

DEAD_FRACTION_SUFFIX = "/" + DEAD_FRACTION  # act/<layer>/dead_fraction
HEALTHY_UPDATE_RATIO = (1e-3, 1e-2)  # LOGFORMAT.md: healthy ‖Δw‖/‖w‖
MAX_COLUMNS = 400  # heatmap columns over the run's steps; longer runs are binned
LOSS_TAGS = ("train/loss", "loss")  # the loss as watch() logs it (log_loss / the fit callback), else a plain "loss"
MAX_PHRASES = 4  # sampling phrases in the interval text; more changes are counted, not listed


@dataclass(frozen=True, slots=True)
class RatioMatrix:
    """log10 of the update ratio, one row per parameter, one column per measured step (or bin of steps).

    ``edges`` (len(columns) + 1, in steps) bound the columns: a measured step's column is [step - 0.5, step + 0.5]
    (a bin's: the bin's steps), and the steps no parameter was measured at between two columns are a column of
    NaN, so no cell spans steps that were not measured. A binned column holds the value of its steps farthest from
    the healthy band (in log10), so neither an explosion nor a vanishing stretch is averaged away. NaN: no value."""

    names: tuple[str, ...]
    steps: np.ndarray  # first measured step of each column (the gap columns: the first step not measured)
    edges: np.ndarray  # float, len(steps) + 1
    log10_ratios: np.ndarray  # shape (len(names), len(steps))
    steps_per_column: int
    measured: np.ndarray  # bool per column: False for the columns of steps not measured


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


def _column_bounds(occupied: np.ndarray, first: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns for the occupied bins (sorted bin indices) with a NaN column wherever bins in between are empty:
    (first step of each column, edges, measured flags)."""
    starts, edges, measured = [], [first + occupied[0] * width - 0.5], []
    for index, bin_index in enumerate(occupied):
        begin = first + bin_index * width
        if index and bin_index > occupied[index - 1] + 1:  # steps with no measurement: a column of their own
            starts.append(first + (occupied[index - 1] + 1) * width)
            edges.append(begin - 0.5)
            measured.append(False)
        starts.append(begin)
        edges.append(begin + width - 0.5)
        measured.append(True)
    return np.asarray(starts, np.int64), np.asarray(edges, float), np.asarray(measured, bool)


def ratio_matrix(store: LogdirStore, run: str, max_columns: int = MAX_COLUMNS) -> RatioMatrix:
    """The run's update ratios, binned by steps when its steps span more than ``max_columns``."""
    tags = tags_with_prefix(store, run, UPDATE_RATIO)
    columns = {name: store.scalars(run, tag)[0] for name, tag in tags.items()}
    all_steps = np.unique(np.concatenate([c.steps for c in columns.values()])) if columns else np.empty(0, np.int64)
    if not len(all_steps):
        return RatioMatrix(tuple(columns), all_steps, np.empty(0), np.empty((len(columns), 0)), 1, np.empty(0, bool))
    first = int(all_steps[0])
    width = max(1, -(-(int(all_steps[-1]) - first + 1) // max_columns))  # steps per bin (ceil division)
    occupied = np.unique((all_steps - first) // width)
    starts, edges, measured = _column_bounds(occupied, first, width)
    column_of_bin = np.full(int(occupied[-1]) + 1, -1)
    column_of_bin[occupied] = np.flatnonzero(measured)
    matrix = np.full((len(columns), len(starts)), np.nan)
    center = float(np.mean(np.log10(HEALTHY_UPDATE_RATIO)))
    for row, series in enumerate(columns.values()):
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log10(series.values)
        column = column_of_bin[(series.steps - first) // width]
        distance = np.where(np.isfinite(logs), np.abs(logs - center), np.where(np.isnan(logs), -1.0, np.inf))
        order = np.lexsort((distance, column))  # per column, the farthest from the band last
        last = np.r_[column[order][1:] != column[order][:-1], True]
        matrix[row, column[order][last]] = logs[order][last]
    return RatioMatrix(tuple(columns), starts, edges, matrix, width, measured)


def layer_views(store: LogdirStore, cache: SmoothingCache, run: str, prefix: str, suffix: str = "") -> list[ScalarView]:
    """One display-ready (downsampled, envelope-kept) series per tag ``<prefix><name><suffix>`` of the run."""
    return [scalar_view(store, cache, run, tag) for tag in tags_with_prefix(store, run, prefix, suffix).values()]


def loss_tag(store: LogdirStore, run: str) -> str | None:
    """The run's loss tag: ``train/loss`` as watch() logs it, else a plain ``loss``; None when it has neither."""
    try:
        tags = set(store.scalar_tags(run))
    except UnknownSeries:
        return None
    return next((tag for tag in LOSS_TAGS if tag in tags), None)


def measured_steps(store: LogdirStore, run: str) -> np.ndarray:
    """The steps at which watch() measured the run's statistics (any update ratio or gradient norm), sorted."""
    tags = [*tags_with_prefix(store, run, UPDATE_RATIO).values(), *tags_with_prefix(store, run, GRAD_NORM).values(),
            *tags_with_prefix(store, run, ACTIVATION, DEAD_FRACTION_SUFFIX).values()]
    if not tags:
        return np.empty(0, np.int64)
    return np.unique(np.concatenate([store.scalars(run, tag)[0].steps for tag in tags]))


def _every(spacing: int) -> str:
    return "every step" if spacing == 1 else f"every {spacing} steps"


def _loose(steps: list[int], limit: int = 6) -> str:
    shown = ", ".join(str(step) for step in steps[:limit]) + (", …" if len(steps) > limit else "")
    return f"step {shown}" if len(steps) == 1 else f"steps {shown}"


def sampling_phrases(steps: np.ndarray) -> list[str]:
    """How the steps were sampled, in words: a stretch of three or more steps at equal spacing is "every k steps
    from step a to b" ("every step …" for k = 1); steps outside such stretches are listed ("steps 54, 59")."""
    steps = np.asarray(steps, np.int64)
    phrases: list[str] = []
    loose: list[int] = []
    begin = 0
    while begin < len(steps):
        end = begin + 1  # the stretch is steps[begin:end]
        if end < len(steps):
            spacing = int(steps[end] - steps[begin])
            while end + 1 < len(steps) and steps[end + 1] - steps[end] == spacing:
                end += 1
            end += 1
        if end - begin >= 3:
            if loose:
                phrases.append(_loose(loose))
                loose = []
            phrases.append(f"{_every(spacing)} from step {int(steps[begin])} to {int(steps[end - 1])}")
            begin = end
        else:
            loose.append(int(steps[begin]))
            begin += 1
    if loose:
        phrases.append(_loose(loose))
    return phrases


def sampling_text(steps: np.ndarray, max_phrases: int = MAX_PHRASES) -> str:
    """One sentence for the page: which steps were measured (the charts draw markers at these steps only)."""
    phrases = sampling_phrases(steps)
    if not phrases:
        return "no step measured yet"
    if len(phrases) > max_phrases:
        hidden = len(phrases) - max_phrases + 1
        phrases = [*phrases[:max_phrases - 1], f"… ({hidden} more stretches) …", phrases[-1]]
    return f"statistics measured {', then '.join(phrases)} ({len(steps)} steps)"
