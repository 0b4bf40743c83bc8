"""The loss-spike rule, judged for every loss at the cost of one comparison for most of them."""
from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque

from instrumentation.dynamics.thresholds import DynamicsThresholds
from instrumentation.format.alert_names import LOSS_SPIKE
from instrumentation.format.alerts import Alert

LAG = 8  # losses kept aside (not yet in the window) before the window is brought up to date
_NO_ALERTS: tuple[Alert, ...] = ()
_NEG_INF = -math.inf


class LossSpikeRule:
    """A loss far above the recent median, or not finite: a spike (docs/dynamics.md). Judged once
    ``loss_min_history`` losses are in; reported at the first step of each run of spikes (no patience).

    Every loss is judged exactly as if the window were updated at each step. The window (a deque and a sorted copy
    for the median) is brought up to date every ``LAG`` losses, not at each: in between a loss at or below a
    *quick limit* is no spike whatever the losses kept aside were. After k losses replace k of a window, its i-th
    smallest value is at least the old window's (i − k)-th, so the median is at least the old window's value
    ``LAG`` ranks below the middle, and the limit (increasing in the median) at least ``quick_limit``. A loss
    above it (or not finite) brings the window up to date and is judged in full.

    ``quick_limit``, ``pending`` and ``lag`` are that fast path, readable: a caller on a hot path may take it
    itself — a loss with ``-inf < loss <= quick_limit`` while ``len(pending) < lag - 1`` is appended to ``pending``
    and is no spike — and call ``observe`` for the others (what ``observe`` would do, without the call)."""

    def __init__(self, thresholds: DynamicsThresholds) -> None:
        self.factor, self.rise = thresholds.loss_spike_factor, thresholds.loss_spike_min_rise
        self.min_history = thresholds.loss_min_history
        self._window: deque[float] = deque(maxlen=thresholds.loss_window)
        self._sorted: list[float] = []  # the window, sorted (the median without a sort per step)
        self.pending: list[float] = []  # finite losses at or below the quick limit, not in the window yet
        self.lag = min(LAG, (thresholds.loss_window - 1) // 2)
        self.quick_limit = _NEG_INF
        self.first_median: float | None = None
        self.in_spike = False

    def observe(self, step: int, value: float) -> tuple[Alert, ...]:
        """The alerts for the loss ``value`` of ``step`` (none, or one ``loss_spike``)."""
        if _NEG_INF < value <= self.quick_limit:  # NOTE: the common case (NaN and ±inf fail this test)
            pending = self.pending
            pending.append(value)
            if len(pending) >= self.lag:
                self._catch_up()
            return _NO_ALERTS
        self._catch_up()
        alerts = self._judge(step, value)
        self._set_quick_limit()
        return alerts

    def window(self) -> list[float]:
        """The recent losses the median is taken over, oldest first."""
        self._catch_up()
        return list(self._window)

    def median(self) -> float:
        """``statistics.median(window())``, from the sorted copy."""
        self._catch_up()
        ordered, count = self._sorted, len(self._sorted)
        middle = count // 2
        return ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    def _judge(self, step: int, value: float) -> tuple[Alert, ...]:
        alerts = _NO_ALERTS
        count = len(self._window)
        if count >= self.min_history:
            recent = self.median()
            if self.first_median is None:
                self.first_median = recent
            limit = max(self.factor * recent, recent + self.rise * self.first_median)
            spike = not math.isfinite(value) or value > limit
            if spike and not self.in_spike:
                alerts = (Alert(LOSS_SPIKE, "warning" if math.isfinite(value) else "error", "loss",
                                f"loss {value:.4g} at step {step} is above {limit:.4g} ({self.factor:g}× the median "
                                f"{recent:.4g} of the last {count} steps)", step,
                                evidence={"loss": value, "median": recent, "limit": limit,
                                          "window": list(self._window)}),)
            self.in_spike = spike
        if math.isfinite(value):
            self._add(value)
        return alerts

    def _add(self, value: float) -> None:
        window = self._window
        if len(window) == window.maxlen:
            del self._sorted[bisect_left(self._sorted, window[0])]
        window.append(value)
        insort(self._sorted, value)

    def _catch_up(self) -> None:
        pending = self.pending
        if pending:
            self.in_spike = False  # each was judged no spike
            self._window.extend(pending)  # NOTE: the deque drops the oldest; one sort of the window beats insorts
            self._sorted = sorted(self._window)
            pending.clear()
            self._set_quick_limit()

    def _set_quick_limit(self) -> None:
        """The least limit the next ``LAG`` losses can be judged against (-inf while the window fills)."""
        ordered = self._sorted
        if self.first_median is None or len(ordered) < self._window.maxlen or self.lag < 1:
            self.quick_limit = _NEG_INF
            return
        low = ordered[(len(ordered) - 1) // 2 - self.lag]
        self.quick_limit = max(self.factor * low, low + self.rise * self.first_median)
