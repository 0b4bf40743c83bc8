"""Activation statistics of leaf layers (mean |a|, dead and saturated fractions), from forward hooks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from instrumentation.format import tags as tag_names

RECTIFIERS = ("ReLU", "LeakyReLU", "GELU")  # dead_fraction: units never positive over the batch
BOUNDED = {"Sigmoid": (0.0, 1.0), "Tanh": (-1.0, 1.0)}  # saturated_fraction: outputs within 1 % of a bound
AFFINE = ("Linear", "Conv2d")  # mean_abs of the output only
WATCHED_TYPES = RECTIFIERS + tuple(BOUNDED) + AFFINE
SATURATION_MARGIN = 0.01  # share of the output range next to each bound that counts as saturated


@dataclass(frozen=True, slots=True)
class ActivationStats:
    """One layer's output on one batch; a statistic that does not apply to the layer type is None."""

    layer: str
    mean_abs: float
    dead_fraction: float | None = None
    saturated_fraction: float | None = None

    def scalars(self) -> list[tuple[str, float]]:
        """(``act/<layer>/<stat>`` tag, value) pairs of the statistics that apply."""
        values = (self.mean_abs, self.dead_fraction, self.saturated_fraction)
        return [(tag, value) for tag, value in zip(activation_tags(self.layer), values) if value is not None]


def activation_tags(layer: str) -> tuple[str, str, str]:
    """The ``act/<layer>/mean_abs|dead_fraction|saturated_fraction`` tags of a layer."""
    mean_abs, dead, saturated = (tag_names.activation_tag(layer, stat) for stat in tag_names.ACTIVATION_STATS)
    return mean_abs, dead, saturated


def watched_layers(model: Any) -> list[tuple[str, Any]]:
    """(dotted path, module) of every module whose type is one of ``WATCHED_TYPES``."""
    return [(path or type(module).__name__, module) for path, module in model.named_modules()
            if type(module).__name__ in WATCHED_TYPES]


def dead_fraction(output: np.ndarray) -> float:
    """Share of units never positive in the batch. A unit is a feature (axis 1 of a 2-D output) or a channel (axis
    1 of an N-C-… output, over every position): a filter that fires nowhere is dead."""
    if output.ndim < 2 or output.shape[0] == 0:
        return float(np.mean(output <= 0)) if output.size else 0.0
    positive = output > 0
    alive = np.logical_or.reduce(positive, axis=0) if output.ndim == 2 else \
        np.logical_or.reduce(positive, axis=(0,) + tuple(range(2, output.ndim)))
    return 1.0 - float(np.count_nonzero(alive)) / alive.size


def saturated_fraction(output: np.ndarray, low: float, high: float) -> float:
    margin = SATURATION_MARGIN * (high - low)
    saturated = np.count_nonzero(output <= low + margin) + np.count_nonzero(output >= high - margin)
    return saturated / max(output.size, 1)


_ones_by_length: dict[tuple[int, Any], np.ndarray] = {}
_scratch_by_length: dict[tuple[int, Any], np.ndarray] = {}


def _scratch(length: int, dtype: Any) -> np.ndarray:
    """A buffer of ``length`` elements kept for |a| (one per layer output size)."""
    buffer = _scratch_by_length.get((length, dtype))
    if buffer is None:
        if len(_scratch_by_length) > 16:
            _scratch_by_length.clear()
        buffer = _scratch_by_length[(length, dtype)] = np.empty(length, dtype=dtype)
    return buffer


def _ones(length: int, dtype: Any) -> np.ndarray:
    ones = _ones_by_length.get((length, dtype))
    if ones is None:
        if len(_ones_by_length) > 64:
            _ones_by_length.clear()
        ones = _ones_by_length[(length, dtype)] = np.ones(length, dtype=dtype)
    return ones


def unit_sums(output: np.ndarray) -> np.ndarray | None:
    """Per unit (axis 1), the sum over the batch and every position, with BLAS matrix-vector products (one pass
    over the output, no temporary as large as it); None where that does not apply (not a contiguous float array
    with a batch and a unit axis)."""
    if output.ndim < 2 or output.dtype.kind != "f" or output.size == 0 or not output.flags.c_contiguous:
        return None
    batch, units = output.shape[0], output.shape[1]
    if output.ndim > 2:
        positions = output.size // (batch * units)
        output = (output.reshape(batch * units, positions) @ _ones(positions, output.dtype)).reshape(batch, units)
    return _ones(batch, output.dtype) @ output


def relu_stats(layer: str, sums: np.ndarray, size: int) -> ActivationStats:
    """A ReLU output's statistics from its per-unit sums (``unit_sums``) and element count: never negative, so the
    sums give both the mean and the units that never fired."""
    return ActivationStats(layer, float(np.add.reduce(sums)) / size,
                           dead_fraction=1.0 - float(np.count_nonzero(sums > 0)) / sums.size)


def activation_stats(layer: str, kind: str, output: np.ndarray) -> ActivationStats:
    size = max(output.size, 1)
    if kind == "ReLU":
        sums = unit_sums(output)
        if sums is not None:
            return relu_stats(layer, sums, size)
    if output.dtype.kind == "f" and output.flags.c_contiguous and output.size:
        flat = output.reshape(-1)
        if kind not in ("ReLU", "Sigmoid"):  # those two are never negative
            flat = np.abs(flat, out=_scratch(flat.size, flat.dtype))  # NOTE: no new buffer (a page fault each)
        # NOTE: BLAS dot with ones: ~3x np.add.reduce, and unlike ?asum its sum does not depend on the array's
        # alignment (the same run gives the same statistics, and so the same alerts)
        mean_abs = float(np.dot(flat, _ones(flat.size, flat.dtype))) / size
    else:
        magnitudes = output if kind in ("ReLU", "Sigmoid") else np.abs(output)
        mean_abs = float(np.add.reduce(magnitudes, axis=None)) / size
    if kind in RECTIFIERS:
        return ActivationStats(layer, mean_abs, dead_fraction=dead_fraction(output))
    if kind in BOUNDED:
        return ActivationStats(layer, mean_abs, saturated_fraction=saturated_fraction(output, *BOUNDED[kind]))
    return ActivationStats(layer, mean_abs)
