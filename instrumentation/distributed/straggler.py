"""Straggler: from the busy time of every rank over a window of steps, whether this rank is slower than the others."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from instrumentation.format import alert_names as keys
from instrumentation.format.alerts import Alert
from instrumentation.format.ranks import rank_name

DEFAULT_WINDOW = 20  # steps between two comparisons (one all_gather of the window's busy times)
DEFAULT_MARGIN = 0.15  # a step counts when this rank's busy time is >= (1 + margin) x the others' median there
DEFAULT_MIN_STEPS = 16  # of the window's steps, how many must count
# A window that begins before this step is compared but never reported: a job's first steps hold every observer's
# warm-up (the pacers observe every step) and first-touch costs, which land on the ranks unevenly
DEFAULT_WARMUP_STEPS = DEFAULT_WINDOW


@dataclass(frozen=True, slots=True)
class StragglerSettings:
    window: int = DEFAULT_WINDOW
    margin: float = DEFAULT_MARGIN
    min_steps: int = DEFAULT_MIN_STEPS
    warmup_steps: int = DEFAULT_WARMUP_STEPS

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 2:
            raise ValueError(f"straggler window must be an integer >= 2 steps, got {self.window!r}")
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float)) or not self.margin > 0:
            raise ValueError(f"straggler margin must be a share > 0 (0.15: 15 % slower), got {self.margin!r}")
        if (isinstance(self.min_steps, bool) or not isinstance(self.min_steps, int)
                or not 1 <= self.min_steps <= self.window):
            raise ValueError(f"straggler min_steps must be an integer in [1, window={self.window}], "
                             f"got {self.min_steps!r}")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"straggler warmup_steps must be an integer >= 0, got {self.warmup_steps!r}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One window's comparison for one rank: the steps where it was over the margin, its median busy time, the median
    of the others' per-step median, and whether that makes it a straggler."""

    steps_over: int
    busy_ms: float
    others_busy_ms: float
    straggler: bool

    @property
    def ratio(self) -> float:
        return self.busy_ms / self.others_busy_ms if self.others_busy_ms > 0 else float("inf")


def compare(busy_ms: np.ndarray, rank: int, settings: StragglerSettings) -> Verdict | None:
    """``busy_ms``: (world size, window) busy times, NaN where a rank has no figure for a step. None with a single
    rank or no step where this rank and another have one."""
    busy_ms = np.asarray(busy_ms, dtype=np.float64)
    if busy_ms.ndim != 2 or busy_ms.shape[0] < 2 or not 0 <= rank < busy_ms.shape[0]:
        return None
    own = busy_ms[rank]
    with warnings.catch_warnings():  # NOTE: a step no other rank has a figure for is NaN, and left out below
        warnings.simplefilter("ignore", RuntimeWarning)
        others = np.nanmedian(np.delete(busy_ms, rank, axis=0), axis=0)
    valid = np.isfinite(own) & np.isfinite(others) & (others > 0)
    if not valid.any():
        return None
    over = int(np.count_nonzero(own[valid] >= (1 + settings.margin) * others[valid]))
    return Verdict(over, float(np.median(own[valid])), float(np.median(others[valid])), over >= settings.min_steps)


class StragglerRule:
    """Reports this rank once per episode: a window that makes it a straggler raises the alert unless the last one
    did too; a window that does not ends the episode. A window beginning before ``warmup_steps`` is compared
    (``last``) but neither reported nor counted in an episode."""

    def __init__(self, rank: int, world_size: int, settings: StragglerSettings) -> None:
        self.rank, self.world_size, self.settings = rank, world_size, settings
        self.in_episode = False
        self.last: Verdict | None = None

    def window(self, first_step: int, last_step: int, busy_ms: np.ndarray) -> Alert | None:
        verdict = self.last = compare(busy_ms, self.rank, self.settings)
        if verdict is None or not verdict.straggler or first_step < self.settings.warmup_steps:
            self.in_episode = False
            return None
        if self.in_episode:
            return None
        self.in_episode = True
        settings, name = self.settings, rank_name(self.rank)
        return Alert(keys.STRAGGLER, "warning", name,
                     f"{name} is slower than the other ranks: its busy time (step - allreduce, data and CPU waits) was "
                     f">= {1 + settings.margin:.2f}x their median on {verdict.steps_over} of steps {first_step}-"
                     f"{last_step}; median {verdict.busy_ms:.2f} ms vs {verdict.others_busy_ms:.2f} ms "
                     f"({verdict.ratio:.2f}x)", last_step,
                     evidence={keys.RANK: self.rank, keys.WORLD_SIZE: self.world_size,
                               keys.WINDOW_STEPS: [first_step, last_step], keys.BUSY_MS: verdict.busy_ms,
                               keys.OTHERS_BUSY_MS: verdict.others_busy_ms, keys.RATIO: verdict.ratio,
                               keys.MARGIN: settings.margin, keys.MIN_STEPS: settings.min_steps,
                               keys.STEPS_OVER: verdict.steps_over})
