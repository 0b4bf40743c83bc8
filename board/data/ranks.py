"""What the Ranks page shows of a data-parallel run group (`<group>/rank<k>`): step times side by side, the per-step
skew across ranks, each rank's compute / communication / wait / data / CPU wait breakdown, replica agreement and its
alerts."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.alerts import AlertFilter, RunAlert, alert_index
from board.data.downsample import DEFAULT_POINTS, envelope_indices
from board.data.series import ScalarColumns
from board.data.store import LogdirStore, UnknownSeries
from board.data.views import SmoothingCache, scalar_view
from instrumentation.format import ranks as rank_names
from instrumentation.format.alert_names import DISTRIBUTED_KINDS as RANK_ALERT_KINDS
from instrumentation.format.tags import (ALLREDUCE_MS, ALLREDUCE_WAIT_MS, COMM_BYTES, CPU_WAIT_MS, DATA_TIME_MS,
                                         PARAM_CHECKSUM, RANK_STEP_TAGS, STEP_TIME_MS)

RANK_TAGS = RANK_STEP_TAGS  # step, data, AllReduce in flight, AllReduce wait, bytes, CPU wait: the rank monitor's row


@dataclass(frozen=True, slots=True)
class RankRun:
    rank: int
    run: str  # `<group>/rank<k>`


@dataclass(frozen=True, slots=True)
class StepSkew:
    """(max − min) / median of the step time across `ranks`, at the steps every one of them logged."""

    ranks: tuple[int, ...]
    steps: np.ndarray  # int64
    skew: np.ndarray  # float64; NaN where the median step time is 0 or a rank's time is not finite
    slowest: np.ndarray  # int64: the rank with the longest step time at each step
    max_ms: np.ndarray
    min_ms: np.ndarray
    median_ms: np.ndarray


@dataclass(frozen=True, slots=True)
class RankBreakdown:
    """Medians over the rank's steps (each component's median on its own: they need not add up to `step_ms`).

    compute = step − wait − data − cpu_wait at each step (the straggler rule's busy time), so the four parts add up to
    the step; `allreduce_ms` is the time with a collective in flight, which overlaps compute (backward) when buckets
    are sent early, so it is not a part of the step's sum. None: the tag is not logged."""

    rank: int
    run: str
    steps: int  # steps with a step time
    step_ms: float | None
    compute_ms: float | None
    wait_ms: float | None
    data_ms: float | None
    cpu_wait_ms: float | None  # runnable, waiting for a CPU, outside the AllReduce wait
    allreduce_ms: float | None
    comm_bytes: float | None  # per step


@dataclass(frozen=True, slots=True)
class ReplicaCheck:
    step: int
    checksums: tuple[float, ...]  # one per rank of `ReplicaAgreement.ranks`
    agree: bool


@dataclass(frozen=True, slots=True)
class ReplicaAgreement:
    """The parameter checksums of `ranks` compared at each step that every one of them logged."""

    ranks: tuple[int, ...]
    checks: tuple[ReplicaCheck, ...]
    first_divergent_step: int | None
    pending_steps: int  # checksum steps some ranks logged and others not (yet)


@dataclass(frozen=True, slots=True)
class RanksView:
    group: str
    ranks: tuple[RankRun, ...]
    skew: StepSkew
    breakdown: tuple[RankBreakdown, ...]
    replicas: ReplicaAgreement
    alerts: tuple[RunAlert, ...]  # straggler and replica_divergence alerts of the group's ranks, oldest first
    notes: tuple[str, ...]  # what is missing, in words (tags no rank logs, ranks without some tag)
    warnings: dict[str, tuple[str, ...]]  # rank run → why some of its data may be missing (unreadable, corrupt)


class UnknownGroup(UnknownSeries):
    """A run group without rank sub-runs (the API answers 404)."""


def rank_of(run: str) -> int | None:
    """k of a run named `…/rank<k>` (or `rank<k>`), else None."""
    return rank_names.rank_of(run.rpartition("/")[2])


def rank_groups(store: LogdirStore) -> dict[str, tuple[RankRun, ...]]:
    """Group → its rank sub-runs ordered by rank, for every group that has any."""
    groups: dict[str, list[RankRun]] = {}
    for summary in store.runs():
        rank = rank_of(summary.name)
        if rank is not None:
            groups.setdefault(summary.group, []).append(RankRun(rank, summary.name))
    return {group: tuple(sorted(ranks, key=lambda r: r.rank)) for group, ranks in sorted(groups.items())}


def group_ranks(store: LogdirStore, group: str) -> tuple[RankRun, ...]:
    ranks = rank_groups(store).get(group)
    if not ranks:
        shown = group if len(group) <= 200 else group[:200] + "…"
        raise UnknownGroup(f"no run group {shown!r} with rank sub-runs (<group>/rank<k>)")
    return ranks


def _columns(store: LogdirStore, run: str, tag: str) -> ScalarColumns | None:
    try:
        return store.scalars(run, tag)[0]
    except UnknownSeries:
        return None


def aligned(columns: ScalarColumns, steps: np.ndarray) -> np.ndarray:
    """The series' values at `steps` (its steps are strictly increasing), NaN where it has no point."""
    if len(columns) == 0:
        return np.full(len(steps), np.nan)
    if len(columns) == len(steps) and np.array_equal(columns.steps, steps):  # the common case: logged at every step
        return columns.values
    index = np.minimum(np.searchsorted(columns.steps, steps), len(columns) - 1)
    return np.where(columns.steps[index] == steps, columns.values[index], np.nan)


def common_steps(series: list[ScalarColumns]) -> np.ndarray:
    if not series:
        return np.empty(0, np.int64)
    steps = series[0].steps
    for columns in series[1:]:
        if not (len(columns) == len(steps) and np.array_equal(columns.steps, steps)):
            steps = np.intersect1d(steps, columns.steps, assume_unique=True)
    return steps


def step_skew(step_times: dict[int, ScalarColumns]) -> StepSkew:
    """Skew of the step time across the ranks of `step_times` (rank → its series), at the steps all of them logged."""
    ranks = tuple(sorted(step_times))
    steps = common_steps([step_times[rank] for rank in ranks])
    if not ranks or len(steps) == 0:
        empty = np.empty(0, np.float64)
        return StepSkew(ranks, np.empty(0, np.int64), empty, np.empty(0, np.int64), empty, empty, empty)
    matrix = np.stack([aligned(step_times[rank], steps) for rank in ranks])  # ranks × steps
    high, low, middle = matrix.max(axis=0), matrix.min(axis=0), np.median(matrix, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(middle > 0, (high - low) / middle, np.nan)
    slowest = np.asarray(ranks, np.int64)[np.argmax(np.nan_to_num(matrix, nan=-np.inf), axis=0)]
    return StepSkew(ranks, steps, skew, slowest, high, low, middle)


def _median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else None


def compute_ms(step_time: ScalarColumns, wait: ScalarColumns | None, data: ScalarColumns | None,
               cpu_wait: ScalarColumns | None = None) -> np.ndarray:
    """compute (busy) = step − wait − data − cpu_wait at each step of `step_time`, the busy time of the straggler rule
    (instrumentation/distributed/monitor.py): a part the rank never logs (None) counts 0, a part it logs but not at
    that step makes it NaN."""
    busy = step_time.values
    for part in (wait, data, cpu_wait):
        if part is not None:
            busy = busy - aligned(part, step_time.steps)
    return busy


def rank_breakdown(rank: RankRun, series: dict[str, ScalarColumns]) -> RankBreakdown:
    """Medians of the rank's step, compute, wait, data, CPU wait, AllReduce and bytes, over the steps it logged a step
    time."""
    step_time = series.get(STEP_TIME_MS)
    if step_time is None:
        medians = {tag: _median(columns.values) for tag, columns in series.items()}
        return RankBreakdown(rank.rank, rank.run, 0, None, None, medians.get(ALLREDUCE_WAIT_MS),
                             medians.get(DATA_TIME_MS), medians.get(CPU_WAIT_MS), medians.get(ALLREDUCE_MS),
                             medians.get(COMM_BYTES))
    steps = step_time.steps
    at_steps = {tag: aligned(columns, steps) for tag, columns in series.items() if tag != STEP_TIME_MS}
    compute = compute_ms(step_time, series.get(ALLREDUCE_WAIT_MS), series.get(DATA_TIME_MS), series.get(CPU_WAIT_MS))
    optional = {tag: _median(values) for tag, values in at_steps.items()}
    return RankBreakdown(rank.rank, rank.run, len(steps), _median(step_time.values), _median(compute),
                         optional.get(ALLREDUCE_WAIT_MS), optional.get(DATA_TIME_MS), optional.get(CPU_WAIT_MS),
                         optional.get(ALLREDUCE_MS), optional.get(COMM_BYTES))


def replica_agreement(checksums: dict[int, ScalarColumns]) -> ReplicaAgreement:
    """Checksums compared exactly (they are integers below 2**24, exact in float32) at the steps every rank logged."""
    ranks = tuple(sorted(checksums))
    if len(ranks) < 2:
        return ReplicaAgreement(ranks, (), None, 0)
    steps = common_steps([checksums[rank] for rank in ranks])
    logged = np.unique(np.concatenate([checksums[rank].steps for rank in ranks]))
    matrix = np.stack([aligned(checksums[rank], steps) for rank in ranks]) if len(steps) else np.empty((len(ranks), 0))
    agree = (matrix == matrix[0]).all(axis=0)  # NaN never agrees: a checksum is never NaN
    differing = np.flatnonzero(~agree)
    checks = tuple(ReplicaCheck(int(step), tuple(matrix[:, i].tolist()), bool(agree[i])) for i, step in
                   enumerate(steps.tolist()))
    return ReplicaAgreement(ranks, checks, int(steps[differing[0]]) if len(differing) else None,
                            len(logged) - len(steps))


def _missing_notes(ranks: tuple[RankRun, ...], present: dict[str, set[int]]) -> list[str]:
    notes = []
    everyone = {rank.rank for rank in ranks}
    if not present[STEP_TIME_MS]:
        notes.append(f"no rank logs {STEP_TIME_MS}: there are no step times to compare")
    if not present[ALLREDUCE_MS] and not present[ALLREDUCE_WAIT_MS]:
        notes.append(f"this run logs no communication timings ({ALLREDUCE_MS}, {ALLREDUCE_WAIT_MS}): the breakdown "
                     "has no communication or wait, and compute includes any time spent waiting for gradients")
    if not present[DATA_TIME_MS]:
        notes.append(f"this run logs no input timings ({DATA_TIME_MS}): compute includes any time waiting for data")
    if not present[PARAM_CHECKSUM]:
        notes.append(f"this run logs no parameter checksums ({PARAM_CHECKSUM}): replica agreement is not checked")
    elif len(present[PARAM_CHECKSUM]) == 1:
        notes.append(f"only one rank logs {PARAM_CHECKSUM}: there is nothing to compare it with")
    for tag in (*RANK_TAGS, PARAM_CHECKSUM):
        lacking = sorted(everyone - present[tag])
        if present[tag] and lacking:
            names = ", ".join(f"rank{rank}" for rank in lacking)
            one = len(lacking) == 1
            if tag == CPU_WAIT_MS:  # an older instrumentation; no rank logging it is no news (nothing to compare)
                notes.append(f"{names} log{'s' if one else ''} no {tag}: {'its' if one else 'their'} compute counts "
                             "no CPU wait, so it includes any time spent waiting for a CPU, unlike the other ranks'")
            else:
                notes.append(f"{names} log{'s' if one else ''} no {tag}: "
                             f"{'it is' if one else 'they are'} left out of what uses it")
    return notes


def ranks_view(store: LogdirStore, group: str) -> RanksView:
    """Everything the Ranks page and `/api/ranks` show of `group` (every point used; nothing downsampled)."""
    ranks = group_ranks(store, group)
    series: dict[int, dict[str, ScalarColumns]] = {}
    for rank in ranks:
        found = {tag: _columns(store, rank.run, tag) for tag in (*RANK_TAGS, PARAM_CHECKSUM)}
        series[rank.rank] = {tag: columns for tag, columns in found.items() if columns is not None}
    present = {tag: {rank for rank, tags in series.items() if tag in tags} for tag in (*RANK_TAGS, PARAM_CHECKSUM)}
    skew = step_skew({rank: tags[STEP_TIME_MS] for rank, tags in series.items() if STEP_TIME_MS in tags})
    breakdown = tuple(rank_breakdown(rank, {tag: c for tag, c in series[rank.rank].items() if tag != PARAM_CHECKSUM})
                      for rank in ranks)
    replicas = replica_agreement({rank: tags[PARAM_CHECKSUM] for rank, tags in series.items()
                                  if PARAM_CHECKSUM in tags})
    runs = tuple(rank.run for rank in ranks)
    alerts = tuple(alert_index(store).alerts(AlertFilter(kinds=RANK_ALERT_KINDS, runs=runs)))
    summaries = {summary.name: summary for summary in store.runs()}
    warnings = {run: summaries[run].warnings for run in runs if run in summaries and summaries[run].warnings}
    return RanksView(group, ranks, skew, breakdown, replicas, alerts, tuple(_missing_notes(ranks, present)), warnings)


# What the per-rank line chart can show: a tag each rank logs, or compute (busy) derived per step.
LINE_SERIES = {"step": STEP_TIME_MS, "compute": None, "wait": ALLREDUCE_WAIT_MS, "allreduce": ALLREDUCE_MS,
               "data": DATA_TIME_MS, "cpu_wait": CPU_WAIT_MS}


@dataclass(frozen=True, slots=True)
class RankLine:
    """Display-ready points of one rank's series (downsampled, envelope kept; non-finite points left out)."""

    rank: RankRun
    steps: np.ndarray
    values: np.ndarray


def compute_columns(store: LogdirStore, run: str) -> ScalarColumns | None:
    """The rank's `compute_ms` at each step it logged a step time; None without step times."""
    step_time = _columns(store, run, STEP_TIME_MS)
    if step_time is None:
        return None
    return ScalarColumns(step_time.steps, step_time.wall_times, compute_ms(
        step_time, _columns(store, run, ALLREDUCE_WAIT_MS), _columns(store, run, DATA_TIME_MS),
        _columns(store, run, CPU_WAIT_MS)))


def display_indices(steps: np.ndarray, values: np.ndarray, window: tuple[float, float] | None = None,
                    max_points: int = DEFAULT_POINTS) -> np.ndarray:
    """Indices of the points to draw: every finite one inside `window` (steps; None: all, else with one neighbour on
    each side so the line reaches the edges) up to ~`max_points`, else an envelope-keeping sample of them."""
    lo, hi = 0, len(steps)
    if window is not None:
        lo = max(int(np.searchsorted(steps, min(window), side="left")) - 1, 0)
        hi = min(int(np.searchsorted(steps, max(window), side="right")) + 1, hi)
    finite = lo + np.flatnonzero(np.isfinite(values[lo:hi]))
    return finite[envelope_indices(steps[finite], values[finite], max_points)]


def rank_lines(store: LogdirStore, cache: SmoothingCache, ranks: tuple[RankRun, ...], series: str = "step",
               window: tuple[float, float] | None = None) -> list[RankLine]:
    """Each rank's `series` (a key of LINE_SERIES) inside `window`, downsampled for display, for the ranks that have
    it."""
    tag = LINE_SERIES[series]
    lines = []
    for rank in ranks:
        if tag is not None:
            try:
                view = scalar_view(store, cache, rank.run, tag, window=window)
            except UnknownSeries:
                continue
            lines.append(RankLine(rank, view.x, view.raw))
            continue
        columns = compute_columns(store, rank.run)
        if columns is not None:
            shown = display_indices(columns.steps, columns.values, window)
            lines.append(RankLine(rank, columns.steps[shown], columns.values[shown]))
    return lines


def skew_display_indices(skew: StepSkew, window: tuple[float, float] | None = None,
                         max_points: int = DEFAULT_POINTS) -> np.ndarray:
    """`display_indices` of the skew series."""
    return display_indices(skew.steps, skew.skew, window, max_points)
