"""Leak detection: a robust trend on live bytes per step, then attribution to the block groups that accumulate."""
from __future__ import annotations

import operator
from collections import deque
from dataclasses import dataclass
from typing import Any

from engine.data import stage_of
from instrumentation.format import alert_names as names
from instrumentation.format.memory_categories import ACTIVATION, GRADIENT, INPUT, OPTIMIZER_STATE, PARAMETER
from instrumentation.memory.trend import Trend, growth, trend

RISE_SPAN = 8  # the last values of a window ``TrendWindow.wants_every_step`` looks at


@dataclass(frozen=True, slots=True)
class LeakSettings:
    """``warmup_steps`` are ignored (caches fill, optimizer state appears); growth must then last ``window_steps``
    steps, at least ``min_bytes_per_step`` per step and be monotone (Mann–Kendall z >= ``min_z``)."""

    warmup_steps: int = 10
    window_steps: int = 30
    check_every_steps: int = 10
    min_bytes_per_step: float = 1.0
    min_z: float = 4.0

    def __post_init__(self) -> None:
        if self.window_steps < 6 or self.warmup_steps < 0 or self.check_every_steps < 1:
            raise ValueError(f"leak settings need window_steps >= 6, warmup_steps >= 0, check_every_steps >= 1; "
                             f"got {self}")


@dataclass(frozen=True, slots=True)
class LeakGroup:
    """Live blocks sharing (allocation stack, op, shape, dtype, category) whose number grows with the step."""

    site: str  # the innermost user frame, "file:line function"
    stack: tuple[str, ...]
    op: str
    module: str
    shape: tuple[int, ...]
    dtype: str
    category: str
    bytes_per_step: float
    count_per_step: float
    live_count: int
    live_bytes: int

    def to_evidence(self) -> dict[str, Any]:
        return {names.SITE: self.site, names.STACK: list(self.stack), names.OP: self.op, names.MODULE: self.module,
                names.SHAPE: list(self.shape), names.DTYPE: self.dtype, names.CATEGORY: self.category,
                names.BYTES_PER_STEP: round(self.bytes_per_step, 3),
                names.COUNT_PER_STEP: round(self.count_per_step, 3), names.LIVE_COUNT: self.live_count,
                names.LIVE_BYTES: self.live_bytes}

    def origin(self) -> str:
        """Where the blocks come from, as an alert's message says it."""
        if self.category == INPUT and stage_of(self.op):
            return f"held by the input pipeline's {self.op}"
        return f"(op {self.op or '-'}, module {self.module or '-'}) allocated at {self.site}"


class TrendWindow:
    """Per-step values after the warm-up; ``check()`` every ``check_every_steps`` once a window is full."""

    def __init__(self, settings: LeakSettings, min_bytes_per_step: float | None = None) -> None:
        self.settings = settings
        self.min_bytes_per_step = settings.min_bytes_per_step if min_bytes_per_step is None else min_bytes_per_step
        self.steps: deque[int] = deque(maxlen=settings.window_steps)
        self.values: deque[int] = deque(maxlen=settings.window_steps)
        self._seen = 0

    def observe(self, step: int, value: int) -> Trend | None:
        """Record one step's value; the trend when a check is due and it shows sustained growth."""
        self._seen += 1
        if self._seen <= self.settings.warmup_steps:
            return None
        self.steps.append(step)
        self.values.append(value)
        settings = self.settings
        if len(self.steps) < settings.window_steps or (self._seen - settings.warmup_steps) % settings.check_every_steps:
            return None
        return growth(list(self.steps), list(self.values), self.min_bytes_per_step, settings.min_z)

    def wants_every_step(self, span: int = RISE_SPAN) -> bool:
        """Whether the window is not full yet, or its last ``span`` values rise (the last above the first, more rises
        than falls between them: growth a full window may confirm). The tracker then keeps every step end."""
        if len(self.values) < self.settings.window_steps:
            return True
        last = list(self.values)[-span:]
        rises = sum(map(operator.lt, last, last[1:]))
        return last[-1] > last[0] and 2 * rises > len(last) - 1

    def observe_many(self, steps: list[int], values: list[int]) -> list[tuple[int, Trend]]:
        """``observe`` of each (step, value) in order; the (step, trend) of each check that found growth."""
        settings, found = self.settings, []
        skip = min(len(steps), max(0, settings.warmup_steps - self._seen))  # still in the warm-up
        self._seen += skip
        steps, values = steps[skip:], values[skip:]
        if not steps:
            return found
        every, window, warmup = settings.check_every_steps, settings.window_steps, settings.warmup_steps
        first = self._seen + 1  # the count of the first new value
        due = [k for k in range(len(steps)) if (first + k - warmup) % every == 0]
        if due:
            all_steps, all_values, before = [*self.steps, *steps], [*self.values, *values], len(self.steps)
            for k in due:
                end = before + k + 1
                if end >= window:
                    trend_found = growth(all_steps[end - window:end], all_values[end - window:end],
                                         self.min_bytes_per_step, settings.min_z)
                    if trend_found is not None:
                        found.append((steps[k], trend_found))
        self.steps.extend(steps)
        self.values.extend(values)
        self._seen += len(steps)
        return found


def attribute(history: list[tuple[int, dict[tuple, tuple[int, int]]]], device: str, min_z: float) -> list[LeakGroup]:
    """Groups of ``device`` whose live bytes grow with the step over ``history`` (one (step, group → (live bytes, live
    blocks)) per step end of the window, groups as ``boundary.live_groups`` keys them): a Theil–Sen slope > 0 that
    holds in the window's last third and a monotone trend (Mann–Kendall z >= ``min_z``). A bounded buffer of recent
    steps or this step's activations is flat at step ends and is not reported. Largest bytes per step first."""
    if len(history) < 3:
        return []
    steps = [step for step, _ in history]
    _, last = history[-1]
    found = []
    for key, (live_bytes, live_count) in last.items():
        if key[0] != device or live_bytes <= 0:
            continue
        curve = growth(steps, [groups.get(key, (0, 0))[0] for _, groups in history], 1.0, min_z)
        if curve is None:
            continue
        counts = trend(steps, [groups.get(key, (0, 0))[1] for _, groups in history])
        _, stack, op, module, shape, dtype, category = key
        found.append(LeakGroup(site_of(stack, op, module), stack, op, module, shape, dtype, category,
                               curve.slope, counts.slope, live_count, live_bytes))
    found.sort(key=lambda g: (-g.bytes_per_step, g.site))
    return found


def site_of(stack: tuple[str, ...], op: str, module: str) -> str:
    """The innermost user frame; without a recorded stack (stacks off), the op and module that allocated."""
    return stack[0] if stack else f"(no stack) op {op or '-'} in {module or 'top level'}"


def likely_cause(groups: list[LeakGroup]) -> str:
    """A hint at the usual mistake behind what accumulates (the groups are the evidence; this is a guess)."""
    if not groups:
        return "live memory grows every step, but no group of blocks allocated inside the window accounts for it"
    categories = {g.category for g in groups}
    activation_ops = {g.op for g in groups if g.category == ACTIVATION}
    top = groups[0]
    if top.category == PARAMETER or (PARAMETER in categories and categories <= {PARAMETER, GRADIENT, OPTIMIZER_STATE}):
        return ("new parameters are created every step (a layer or Parameter built inside the step function?); "
                "create them once, outside the loop")
    if top.category == ACTIVATION and top.shape == () and len(activation_ops) <= 3:
        return ("one scalar per step is kept with its autograd graph: a running total of losses built from tensors "
                "(total = total + loss); accumulate loss.item() or loss.detach() instead")
    if len(activation_ops) >= 3:
        return ("a whole forward graph survives each step: backward(retain_graph=True) on a graph that stays "
                "referenced, or an output kept together with its graph; keep .detach() copies or .item() values")
    stage = stage_of(top.op) if top.category == INPUT else None
    if stage == "cache":
        return ("cache() keeps every element of the pipeline's first pass: it grows until that pass ends, then "
                "holds the whole data set; cache smaller elements (after decoding or cropping, in a smaller dtype) "
                "or drop cache() if the data set does not fit")
    if stage is not None:
        return (f"the pipeline's {stage} stage is filling its buffer (up to buffer_size, or num_parallel_calls, "
                "elements); a smaller buffer or smaller elements hold less, and prefetch(2) usually overlaps input "
                "and training")
    if top.category == INPUT:
        return ("input batches accumulate: a queue or list of batches grows without bound (a producer running "
                "ahead of training?); bound the queue")
    if top.category == ACTIVATION:
        return ("one activation per step is kept alive: a list filled by a callback or hook keeps every batch's "
                "tensor; keep .detach().numpy() copies you need, or bound the list")
    return f"{top.category} buffers allocated at {top.site} survive every step"
