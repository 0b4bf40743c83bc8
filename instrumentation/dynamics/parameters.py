"""Per-parameter gradient/weight norms, update ratios ‖Δw‖/‖w‖, min/max and NaN/Inf counts, for all parameters at once."""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from instrumentation.dynamics.segment_stats import Segments, SegmentStats, segment_stats


class ParameterStats(NamedTuple):
    """One optimizer step, for each parameter that had a gradient (in ``names`` order): ‖g‖₂, ‖w‖₂ before the step,
    ‖Δw‖₂ and ‖Δw‖/‖w‖ (inf where ‖w‖ = 0 and Δw ≠ 0, nan for 0/0); min/max of the finite values of g and of w
    before the step (nan when there is none); NaN and ±Inf counts of g and w before the step."""

    step: int
    names: tuple[str, ...]
    grad_norms: list[float]
    weight_norms: list[float]
    update_norms: list[float]
    update_ratios: list[float]
    grad_min: list[float]
    grad_max: list[float]
    weight_min: list[float]
    weight_max: list[float]
    grad_nan_counts: list[int]
    grad_inf_counts: list[int]
    weight_nan_counts: list[int]
    weight_inf_counts: list[int]


def _ratio(update: float, weight: float) -> float:
    if weight == 0:
        return math.nan if update == 0 or update != update else math.inf
    return update / weight


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The buffer a parameter of ``dtype`` is reduced in: float16 in float32 (exact copies, no overflowing squares)."""
    return np.result_type(dtype, np.float32)


class _Group:
    """The parameters of one compute dtype. ``buffer`` holds [g₀ … gₙ₋₁ | w₀ … wₙ₋₁] (w before the step) end to
    end, ``scratch`` as many elements for the squares and, at the step's end, w after it."""

    def __init__(self, positions: list[int], sizes: list[int], dtype: np.dtype) -> None:
        self.positions = positions  # where this group's parameters are among the step's active ones
        self.weights_size = sum(sizes)
        self.segments = Segments.from_sizes(sizes + sizes)
        self.update_segments = Segments.from_sizes(sizes)
        self.buffer = np.empty(2 * self.weights_size, dtype)
        self.scratch = np.empty(2 * self.weights_size, dtype)
        self.stats: SegmentStats | None = None


class _Layout:
    """The groups for one set of parameters with gradients, valid while their weight arrays keep sizes and dtypes."""

    def __init__(self, active: tuple[int, ...], weights: list[np.ndarray]) -> None:
        self.active, self.weights = active, weights
        self.signature = [(w.size, w.dtype) for w in weights]
        by_dtype: dict[np.dtype, list[int]] = {}
        for position, weight in enumerate(weights):
            by_dtype.setdefault(compute_dtype(weight.dtype), []).append(position)
        self.groups = [_Group(positions, [weights[p].size for p in positions], dtype)
                       for dtype, positions in by_dtype.items()]
        self.in_order = len(self.groups) == 1  # one group: its order is the parameters' order

    def fits(self, active: tuple[int, ...], weights: list[np.ndarray]) -> bool:
        if active != self.active:
            return False
        if all(map(_same, weights, self.weights)):
            return True
        if [(w.size, w.dtype) for w in weights] != self.signature:
            return False
        self.weights = weights  # new arrays (a GPU copy, a replaced parameter) of the same layout
        return True


def _same(a: Any, b: Any) -> bool:
    return a is b


class ParameterTracker:
    """At ``begin`` copies every gradient and weight that takes part in the step into one flat buffer per compute
    dtype and reduces it per parameter (``segment_stats``: a few passes, whatever the number of parameters); at
    ``end`` Δw is the weights minus that copy: whatever the optimizer did (momentum, weight decay, Adam's moments)
    is in it. Parameters without a gradient (frozen) are left out.

    Memory: 4 × the parameters' elements in their compute dtype (g and w, and as much scratch), outside the
    engine's allocator; reallocated only when the set of parameters with gradients, or a size or dtype, changes.
    """

    def __init__(self, named_parameters: list[tuple[str, Any]]) -> None:
        self.names = tuple(name for name, _ in named_parameters)
        self.params = [param for _, param in named_parameters]
        self._layout: _Layout | None = None
        self._grads: list[np.ndarray] = []
        self._step: int | None = None

    def begin(self, step: int) -> None:
        """Measure gradients and weights, and keep a copy of the weights, before the optimizer updates them."""
        params = self.params
        active = tuple(index for index, param in enumerate(params) if param.grad is not None)
        weights = [params[index].numpy() for index in active]
        grads = [params[index].grad.numpy() for index in active]
        layout = self._layout
        if layout is None or not layout.fits(active, weights):
            layout = self._layout = _Layout(active, weights)
        concatenate = np.concatenate
        for group in layout.groups:
            if layout.in_order:
                concatenate(grads + weights, axis=None, out=group.buffer, casting="same_kind")
            else:
                members = [grads[p] for p in group.positions] + [weights[p] for p in group.positions]
                concatenate(members, axis=None, out=group.buffer, casting="same_kind")
            group.stats = segment_stats(group.buffer, group.segments, group.scratch)
        self._step = step

    def end(self) -> ParameterStats | None:
        """The stats of the step begun last (None without a ``begin``)."""
        if self._step is None:
            return None
        step, self._step = self._step, None
        layout = self._layout
        weights = [self.params[index].numpy() for index in layout.active]
        columns: dict[str, list[Any]] = {}
        for group in layout.groups:
            size = group.weights_size
            after, before = group.scratch[:size], group.buffer[size:]
            members = weights if layout.in_order else [weights[p] for p in group.positions]
            np.concatenate(members, axis=None, out=after, casting="same_kind")
            with np.errstate(over="ignore", invalid="ignore"):  # inf - inf: a NaN update, as it should be
                delta = np.subtract(after, before, out=after)
            updates = segment_stats(delta, group.update_segments, group.scratch[size:], extremes=False)
            values = _columns(group.stats, updates, len(group.positions))
            if layout.in_order:
                columns = values
            else:
                _place(columns, values, group.positions, len(layout.active))
        if not layout.groups:  # no parameter had a gradient
            columns = {key: [] for key in _KEYS}
        sqrt = math.sqrt
        grads, weight_norms, updates = ([sqrt(v) for v in columns[key]] for key in ("grad_sq", "weight_sq", "update_sq"))
        return ParameterStats(step, tuple(self.names[i] for i in layout.active), grads, weight_norms, updates,
                              list(map(_ratio, updates, weight_norms)), columns["grad_min"], columns["grad_max"],
                              columns["weight_min"], columns["weight_max"], columns["grad_nan"], columns["grad_inf"],
                              columns["weight_nan"], columns["weight_inf"])


_KEYS = ("grad_sq", "weight_sq", "update_sq", "grad_min", "grad_max", "weight_min", "weight_max", "grad_nan", "grad_inf",
         "weight_nan", "weight_inf")


def _columns(stats: SegmentStats, updates: SegmentStats, n: int) -> dict[str, list[Any]]:
    """One group's per-segment arrays (its n gradients, then its n weights) as per-parameter lists."""
    values: dict[str, list[Any]] = {"update_sq": updates.sum_squares.tolist()}
    for key, array in (("sq", stats.sum_squares), ("min", stats.minimum), ("max", stats.maximum),
                       ("nan", stats.nan_count), ("inf", stats.inf_count)):
        both = array.tolist()
        values["grad_" + key], values["weight_" + key] = both[:n], both[n:]
    return values


def _place(columns: dict[str, list[Any]], values: dict[str, list[Any]], positions: list[int], count: int) -> None:
    """Put one group's lists at its parameters' positions among all ``count`` active parameters."""
    for key, column in values.items():
        merged = columns.setdefault(key, [0] * count)
        for position, value in zip(positions, column):
            merged[position] = value
