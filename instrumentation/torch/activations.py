"""Activation statistics of a torch layer output: the engine's (``instrumentation.dynamics.activations``), with the
reductions over the output done by torch where it has them (no NumPy pass over the whole output)."""
from __future__ import annotations

from typing import Any

from instrumentation.dynamics.activations import AFFINE, ActivationStats, activation_stats, relu_stats
from instrumentation.torch.arrays import to_numpy


def torch_activation_stats(layer: str, kind: str, output: Any) -> ActivationStats:
    """``activation_stats(layer, kind, output)`` for a tensor: a ReLU's per-unit sums and an affine layer's sum of
    |a| reduced by torch (then a few numbers read); other layer types read the output as a NumPy array."""
    if not output.is_floating_point() or output.dim() < 2 or output.numel() == 0:
        return activation_stats(layer, kind, to_numpy(output))
    values = output.detach()
    if kind == "ReLU":
        units = (0,) + tuple(range(2, values.dim()))
        return relu_stats(layer, to_numpy(values.sum(dim=units)), values.numel())
    if kind in AFFINE:
        return ActivationStats(layer, float(values.abs().sum()) / values.numel())
    return activation_stats(layer, kind, to_numpy(values))
