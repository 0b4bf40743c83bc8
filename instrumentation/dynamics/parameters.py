"""Gradient and weight norms, update ratios ‖Δw‖/‖w‖, min/max and NaN/Inf counts of all parameters at once."""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from instrumentation.dynamics.segment_stats import Segments, SegmentStats, pack, segment_stats


class ParameterStats(NamedTuple):
    """One optimizer step, for each parameter that had a gradient (in ``names`` order): ‖g‖₂, ‖w‖₂ before the step,
    ‖Δw‖₂ and ‖Δw‖/‖w‖ (inf where ‖w‖ = 0 and Δw ≠ 0, nan for 0/0); min/max of the finite values of g and of w
    before the step (nan when there is none or when not asked for); NaN and ±Inf counts of g and w before the step.
    Columns with nothing to report (no min/max asked for, no NaN/Inf found) are tuples shared between steps."""

    step: int
    names: tuple[str, ...]
    grad_norms: list[float]
    weight_norms: list[float]
    update_norms: list[float]
    update_ratios: list[float]
    grad_min: Sequence[float]
    grad_max: Sequence[float]
    weight_min: Sequence[float]
    weight_max: Sequence[float]
    grad_nan_counts: Sequence[int]
    grad_inf_counts: Sequence[int]
    weight_nan_counts: Sequence[int]
    weight_inf_counts: Sequence[int]


def _ratio(update: float, weight: float) -> float:
    if weight == 0:
        return math.nan if update == 0 or update != update else math.inf
    return update / weight


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The buffer a parameter of ``dtype`` is reduced in: float16 in float32 (exact copies, no overflowing squares)."""
    return np.result_type(dtype, np.float32)


class _Group:
    """The parameters of one compute dtype. ``buffer`` holds [g₀ … gₙ₋₁ | w₀ … wₙ₋₁ | Δw₀ … Δwₙ₋₁] (``pack``'s
    layout: g and w copied before the step, Δw after it)."""

    def __init__(self, positions: list[int], sizes: list[int], dtype: np.dtype) -> None:
        self.positions = positions  # where this group's parameters are among the step's active ones
        n = len(sizes)
        self.segments = Segments.from_sizes(sizes * 3)
        self.buffer = np.empty(self.segments.total, dtype)
        weights_start, delta_start = (int(self.segments.starts[i]) for i in (n, 2 * n))
        self.copied, self.before, self.delta = (self.buffer[:delta_start], self.buffer[weights_start:delta_start],
                                                self.buffer[delta_start:])
        pads = self.segments.pads(self.buffer.dtype)
        self.copied_pads, self.delta_pads = pads[:2 * n], pads[2 * n:]


class _Layout:
    """The groups for one set of parameters with gradients, valid while their weight arrays keep sizes and dtypes;
    ``flats`` are 1-D views of those arrays (``np.concatenate`` of 1-D arrays is 2x faster than with ``axis=None``),
    kept only while every array is contiguous (else ``reshape`` copies: then they are made again at each use)."""

    def __init__(self, active: tuple[int, ...], names: tuple[str, ...], weights: list[np.ndarray]) -> None:
        self.active, self.names = active, names
        self.weights, self.flats = weights, _flat_views(weights)
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
        self.weights, self.flats = weights, _flat_views(weights)  # new arrays, same layout
        return True

    def members(self, group: _Group, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return arrays if self.in_order else [arrays[p] for p in group.positions]


def _flat_views(arrays: list[np.ndarray]) -> list[np.ndarray] | None:
    return [a.reshape(-1) for a in arrays] if all(a.flags.c_contiguous for a in arrays) else None


def _same(a: Any, b: Any) -> bool:
    return a is b


class ParameterTracker:
    """At ``begin`` copies the gradients and weights that take part in the step end to end into one flat buffer per
    compute dtype; at ``end`` appends Δw (the weights now minus that copy: whatever the optimizer did — momentum,
    weight decay, Adam's moments — is in it) and reduces the whole buffer per parameter with one ``segment_stats``
    call: a few NumPy passes per step whatever the number of parameters. Parameters without a gradient (frozen) are
    left out. ``extremes=False`` leaves min/max out (NaN in the stats): two passes fewer.

    Memory: 3 × the parameters' elements in their compute dtype (g, w and Δw, each padded by at most 12.5 %),
    outside the engine's allocator; reallocated only when the set of parameters with gradients, or a size or dtype,
    changes.
    """

    def __init__(self, named_parameters: list[tuple[str, Any]], *, extremes: bool = True) -> None:
        self.extremes = extremes
        self.names = tuple(name for name, _ in named_parameters)
        self.params = [param for _, param in named_parameters]
        self._layout: _Layout | None = None
        self._step: int | None = None

    def _current_layout(self) -> _Layout:
        params = self.params
        active = tuple(index for index, param in enumerate(params) if param.grad is not None)
        weights = [params[index].numpy() for index in active]
        layout = self._layout
        if layout is None or not layout.fits(active, weights):
            layout = self._layout = _Layout(active, tuple(self.names[index] for index in active), weights)
        return layout

    def begin(self, step: int) -> None:
        """Copy gradients and weights before the optimizer updates them."""
        layout = self._current_layout()
        params = self.params
        grads = [params[index].grad.numpy().reshape(-1) for index in layout.active]
        for group in layout.groups:
            flats = layout.flats if layout.flats is not None else [w.reshape(-1) for w in layout.weights]
            pack(layout.members(group, grads) + layout.members(group, flats), group.copied_pads, group.copied)
        self._step = step

    def end(self) -> ParameterStats | None:
        """The stats of the step begun last (None without a ``begin``)."""
        if self._step is None:
            return None
        step, self._step = self._step, None
        layout = self._layout
        params = self.params
        weights = [params[index].numpy() for index in layout.active]
        same = layout.flats is not None and all(map(_same, weights, layout.weights))
        flats = layout.flats if same else [w.reshape(-1) for w in weights]
        columns: dict[str, Any] = {}
        for group in layout.groups:
            delta = pack(layout.members(group, flats), group.delta_pads, group.delta)
            with np.errstate(over="ignore", invalid="ignore"):  # inf - inf: a NaN update, as it should be
                np.subtract(delta, group.before, out=delta)
            stats = segment_stats(group.buffer, group.segments, extremes=self.extremes)
            values = _columns(stats, len(group.positions), self.extremes)
            if layout.in_order:
                columns = values
            else:
                _place(columns, values, group.positions, len(layout.active))
        if not layout.groups:  # no parameter had a gradient
            columns = {key: [] for key in _KEYS}
        sqrt = math.sqrt
        grads, weights, updates = ([sqrt(v) for v in columns[key]] for key in ("grad_sq", "weight_sq", "update_sq"))
        return ParameterStats(step, layout.names, grads, weights, updates, list(map(_ratio, updates, weights)),
                              columns["grad_min"], columns["grad_max"], columns["weight_min"], columns["weight_max"],
                              columns["grad_nan"], columns["grad_inf"], columns["weight_nan"], columns["weight_inf"])


_KEYS = ("grad_sq", "weight_sq", "update_sq", "grad_min", "grad_max", "weight_min", "weight_max", "grad_nan",
         "grad_inf", "weight_nan", "weight_inf")


def _columns(stats: SegmentStats, n: int, extremes: bool) -> dict[str, Sequence[Any]]:
    """One group's per-segment arrays (its n gradients, n weights, n updates) as per-parameter lists."""
    values: dict[str, Sequence[Any]] = {}
    arrays = [("sq", stats.sum_squares)]
    arrays += [("min", stats.minimum), ("max", stats.maximum)] if extremes else []
    arrays += [("nan", stats.nan_count), ("inf", stats.inf_count)] if stats.recounted else []
    for key, array in arrays:
        every = array.tolist()
        values["grad_" + key], values["weight_" + key] = every[:n], every[n:2 * n]
        values["update_" + key] = every[2 * n:]
    if not extremes:  # NOTE: the common case: nothing to read
        values["grad_min"] = values["grad_max"] = values["weight_min"] = values["weight_max"] = _filled(math.nan, n)
    if not stats.recounted:
        values["grad_nan"] = values["grad_inf"] = values["weight_nan"] = values["weight_inf"] = _filled(0, n)
    return values


_FILLED: dict[tuple[float, int], tuple[float, ...]] = {}


def _filled(value: float, n: int) -> tuple[float, ...]:
    found = _FILLED.get((value, n))
    if found is None:
        found = _FILLED[(value, n)] = (value,) * n
    return found


def _place(columns: dict[str, Any], values: dict[str, Sequence[Any]], positions: list[int], count: int) -> None:
    """Put one group's lists at its parameters' positions among all ``count`` active parameters."""
    for key, column in values.items():
        merged = columns.setdefault(key, [0] * count)
        for position, value in zip(positions, column):
            merged[position] = value
