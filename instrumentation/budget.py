"""Pacer: how often an observer does its periodic work, so that its measured cost stays within a share of step time."""
from __future__ import annotations

import math
from dataclasses import dataclass

from instrumentation.format import tags as tag_names

DEFAULT_BUDGET = 0.05  # of step time, for one observer (watch() splits its own between its parts)
# Of a budget, what the measured work may take: the rest is headroom for what an observer cannot time itself
# (the engine calling its hooks, the writer thread encoding what it logged).
MEASURED_SHARE = 0.5
WARMUP_STEPS = 32  # observed at every step: the pacer learns the costs, and a bad learning rate shows in these steps
DECIDE_STEPS = 16  # the interval is reconsidered after at least this many steps
MAX_INTERVAL = 1000
SMOOTHING = 0.3  # weight of the newest window in the running estimates
MIN_RUN_SHARE = 0.25  # of the measured budget, what periodic work gets even when the fixed cost takes all of it
RISE_LIMIT = 1.5  # a window's cost above this many times the estimate counts as this much (a real rise: a few windows)
OUTLIER = 10  # a step longer than this many times the estimate counts as this long
GROWTH = 4  # after the first decision the interval grows at most this many times per decision: each longer one is
# measured before the next (the first one follows the warm-up's measurements at once: settled within a few windows)
SHRINK_MARGIN = 0.8  # a shorter interval is taken only when it keeps the cost below this share of the target


def check_budget(owner: str, budget: object) -> float:
    """``budget`` as a float share of step time in (0, 1], or a ValueError naming ``owner``."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1:
        raise ValueError(f"{owner}: budget must be a share of step time in (0, 1], e.g. 0.05, got {budget!r}")
    return float(budget)


def check_every(owner: str, every: object, least: int = 1) -> int | None:
    """``every`` as an int >= ``least``, or None (paced by the budget); a ValueError naming ``owner`` otherwise."""
    if every is None:
        return None
    if isinstance(every, bool) or not isinstance(every, int) or every < least:
        raise ValueError(f"{owner}: every must be None (paced by the budget) or an integer >= {least}, got {every!r}")
    return every


@dataclass(frozen=True, slots=True)
class Pace:
    """A pacer's last window: the observer's measured cost per step (ms), the step time (ms), the cost's share of
    step time, and the interval chosen from them (in effect from there on)."""

    observer: str
    interval: int
    instrumentation_ms: float
    step_ms: float
    share: float

    def scalars(self) -> tuple[tuple[str, str, str], tuple[float, float, float]]:
        """The ``perf/instrumentation_ms|instrumentation_share|interval/<observer>`` tags and their values."""
        tags = tuple(tag_names.pace_tag(stat, self.observer) for stat in tag_names.PACE_STATS)
        return tags, (self.instrumentation_ms, self.share, float(self.interval))  # type: ignore[return-value]

    def write(self, writer: object, step: int) -> None:
        """``add_scalar`` of each of ``scalars()`` at ``step``."""
        for tag, value in zip(*self.scalars()):
            writer.add_scalar(tag, value, step)  # type: ignore[attr-defined]


class Pacer:
    """Chooses ``interval``, the number of steps between two runs of an observer's periodic work (``due(step)``).

    The observer reports with ``record`` what it measured: the time the steps took (its own cost inside them
    included), what it spent at every step whatever the interval (``fixed_ns``) and on its periodic runs
    (``run_ns``, ``runs``). From smoothed estimates per step (base step time ``b``, fixed cost ``f``) and per run
    (``r``), the interval is the least ``k`` with ``f + r / k <= budget · MEASURED_SHARE · b`` (``r / k`` gets at least
    ``MIN_RUN_SHARE`` of that when ``f`` alone exceeds it: thinning cannot help more): settled after the
    warm-up's full observation and a few windows, longer when steps get shorter and shorter when they get longer
    (hysteresis: it gets shorter only if the shorter one keeps the cost within ``SHRINK_MARGIN`` of the budget).
    ``every``: a fixed interval, the costs are still measured. ``measured_share``: of the budget, what the measured
    work may take (an observer that times nearly all it does leaves less headroom); ``min_run_share``: of that,
    what the periodic work keeps when the fixed cost takes it all. ``run_weight``: what a run costs in all, as a
    multiple of what the observer timed of it (its work makes the engine and the next steps slower too: an observer
    that measured this passes it).
    ``min_interval``: the interval never goes below it (e.g. histograms every 100 steps at most)."""

    def __init__(self, observer: str, budget: float = DEFAULT_BUDGET, *, every: int | None = None,
                 min_interval: int = 1, max_interval: int = MAX_INTERVAL, warmup_steps: int = WARMUP_STEPS,
                 measured_share: float = MEASURED_SHARE, min_run_share: float = MIN_RUN_SHARE,
                 run_weight: float = 1.0) -> None:
        self.observer = observer
        self.budget = check_budget(observer, budget)
        self.measured_share, self.min_run_share, self.run_weight = measured_share, min_run_share, run_weight
        self.fixed = every is not None
        self.min_interval, self.max_interval = max(1, min_interval), max(1, min_interval, max_interval)
        self.interval = every if every is not None else self.min_interval
        self.warmup_steps = warmup_steps
        self.seen_steps = 0
        self.base_ns: float | None = None  # per step, without the observer's measured cost
        self.fixed_ns: float | None = None  # per step
        self.run_ns: float | None = None  # per run
        self.last: Pace | None = None
        # the window since the last decision
        self._steps = self._step_ns = self._fixed_ns = self._run_ns = self._runs = 0

    def due(self, step: int) -> bool:
        return step % self.interval == 0

    def record(self, step_ns: int, fixed_ns: int = 0, run_ns: int = 0, runs: int = 0, steps: int = 1) -> bool:
        """Account ``steps`` steps; True when the interval was reconsidered (``last`` is then new)."""
        if self.base_ns is not None and step_ns > steps * OUTLIER * self.base_ns:
            step_ns = int(steps * OUTLIER * self.base_ns)  # a pause (evaluation, a checkpoint) is not a longer step
        self._steps += steps
        self._step_ns += step_ns
        self._fixed_ns += fixed_ns
        self._run_ns += run_ns
        self._runs += runs
        if self._steps < DECIDE_STEPS or not (self._runs or self._steps >= 4 * self.interval):
            return False
        self._decide()
        return True

    def _decide(self) -> None:
        steps, step_ns, fixed_ns, run_ns, runs = self._steps, self._step_ns, self._fixed_ns, self._run_ns, self._runs
        self._steps = self._step_ns = self._fixed_ns = self._run_ns = self._runs = 0
        self.seen_steps += steps
        spent_ns = fixed_ns + run_ns
        # NOTE: the step times hold the observer's in-step cost, not what it spent between steps: subtracting all of
        # it can only make the base shorter, the interval longer
        base = max(step_ns - spent_ns, step_ns / 2) / steps
        self.base_ns = _follow(self.base_ns, base)
        self.fixed_ns = _smooth(self.fixed_ns, fixed_ns / steps)
        if runs:
            self.run_ns = _smooth(self.run_ns, run_ns / runs)
        if not self.fixed and self.seen_steps >= self.warmup_steps:
            longer = self._least_interval(1.0)
            if longer > self.interval:
                first = self.seen_steps - steps < self.warmup_steps  # the warm-up's estimates, each step measured
                self.interval = longer if first else min(longer, GROWTH * self.interval)
            else:  # NOTE: a band, not a point: noise in the measurements does not move the interval back and forth
                self.interval = min(self.interval, self._least_interval(SHRINK_MARGIN))
        self.last = Pace(self.observer, self.interval, spent_ns / steps / 1e6, step_ns / steps / 1e6,
                         spent_ns / base / steps if base > 0 else 0.0)

    def _least_interval(self, margin: float) -> int:
        """The least interval whose predicted cost per step is within ``margin`` of the measured budget."""
        if not self.run_ns:
            return self.min_interval
        target = margin * self.budget * self.measured_share * (self.base_ns or 0.0)
        room = max(target - (self.fixed_ns or 0.0), target * self.min_run_share)
        interval = self.max_interval if room <= 0 else math.ceil(self.run_weight * self.run_ns / room)
        return min(max(interval, self.min_interval), self.max_interval)


def _smooth(old: float | None, new: float) -> float:
    """A cost's running estimate moved towards ``new``, a window at most ``RISE_LIMIT`` times the estimate counting
    as that much (a window with a preemption inside a timed span measures the machine's load, not the work: on a
    loaded machine one span in a dozen of a few hundred microseconds holds a time slice of someone else's)."""
    if old is None:
        return new
    return old + SMOOTHING * (min(new, RISE_LIMIT * old) - old)


def _follow(old: float | None, new: float) -> float:
    """The step time's running estimate moved towards ``new``, or replaced by it when they differ by more than 2x
    (the step changed, e.g. a larger batch: no reason to drift there slowly)."""
    if old is None or not 0.5 * old <= new <= 2 * old:
        return new
    return old + SMOOTHING * (new - old)
