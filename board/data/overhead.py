"""What the instrumentation cost a run: per paced observer, its interval and measured cost (`perf/` pace tags)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.store import LogdirStore, UnknownSeries
from instrumentation.format.tags import INSTRUMENTATION_MS, INSTRUMENTATION_SHARE, INTERVAL, paced_observer

@dataclass(frozen=True, slots=True)
class ObserverCost:
    """One observer of a run as its pacer last measured it (its last window: the interval then, the cost per step in
    ms and its share of step time), and the share at each point it was written. The last window, not an average
    over the run: the first windows are the warm-up, when every step is observed."""

    observer: str
    interval: int
    instrumentation_ms: float
    share: float
    steps: np.ndarray
    shares: np.ndarray


def overhead_runs(store: LogdirStore) -> list[str]:
    """Runs holding any pace tag (`perf/instrumentation_ms|instrumentation_share|interval/<observer>`)."""
    return [run for run, tags in store.all_scalar_tags().items() if any(paced_observer(tag) for tag in tags)]


def observer_costs(store: LogdirStore, run: str) -> list[ObserverCost]:
    """The run's paced observers, in the order their tags were first written; an observer missing a tag gets NaN."""
    try:
        tags = store.scalar_tags(run)
    except UnknownSeries:
        return []
    by_observer: dict[str, dict[str, str]] = {}
    for tag in tags:
        found = paced_observer(tag)
        if found is not None:
            by_observer.setdefault(found[1], {})[found[0]] = tag
    costs = []
    for observer, stats in by_observer.items():
        series = {stat: store.scalars(run, tag)[0] for stat, tag in stats.items()}

        def last(stat: str) -> float:
            columns = series.get(stat)
            return float(columns.values[-1]) if columns is not None and len(columns) else float("nan")

        interval, shares = last(INTERVAL), series.get(INSTRUMENTATION_SHARE)
        costs.append(ObserverCost(
            observer, int(interval) if np.isfinite(interval) else 0, last(INSTRUMENTATION_MS),
            last(INSTRUMENTATION_SHARE),
            shares.steps if shares is not None else np.zeros(0, np.int64),
            shares.values if shares is not None else np.zeros(0)))
    return costs
